//! Pages of a result: the order pages follow, the opaque cursor, and the 1 MB cut.
//!
//! Every page re-runs the query and sorts its rows in one total order: the requested
//! `order_by`, else the query's own top-level `ORDER BY` when it sorts by result columns, else
//! the first column; ties are broken by a digest of the whole row, and identical rows by their
//! count. The cursor holds the last row's sort values and digest, so the next page starts
//! right after it even when rows were added or removed in between: no row is returned twice,
//! and no row that stayed is skipped. A query whose `ORDER BY` uses expressions that are not
//! result columns keeps its own order, and its cursor is a position.

use std::cmp::Ordering;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gluesql_core::data::Value as Sql;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use sqlparser::ast::{Expr, OrderByExpr, Value as Literal};

use super::value::{SortKey, to_json};
use lore_base::error::{LoreError, Result};
use lore_base::keys::to_hex;

/// `order_by`: result columns, each optionally followed by `asc`/`desc` and
/// `nulls first`/`nulls last`, as one comma-separated string or a list.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OrderBy {
    /// e.g. `"type, created_at desc"`.
    One(String),
    /// e.g. `["type", "created_at desc"]`.
    Many(Vec<String>),
}

impl OrderBy {
    fn items(&self) -> Vec<&str> {
        match self {
            Self::One(s) => s.split(',').map(str::trim).collect(),
            Self::Many(v) => v.iter().map(|s| s.trim()).collect(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SortColumn {
    index: usize,
    desc: bool,
    nulls_first: bool,
}

/// How a result is paged.
#[derive(Debug, Clone)]
pub enum Order {
    Keys(Vec<SortColumn>),
    /// The query's own order, resumed by position.
    Positional,
}

fn bad(field: &str, message: impl Into<String>) -> LoreError {
    LoreError::invalid(field, message)
}

fn column_index(labels: &[String], name: &str) -> Result<usize> {
    let mut found = labels.iter().enumerate().filter(|(_, l)| *l == name);
    match (found.next(), found.next()) {
        (Some((i, _)), None) => Ok(i),
        (Some(_), Some(_)) => Err(bad(
            "order_by",
            format!(
                "{name:?} names two result columns; give one of them an alias (AS) and order by that"
            ),
        )),
        (None, _) => Err(bad(
            "order_by",
            format!(
                "{name:?} is not a result column; the columns are: {}",
                labels.join(", ")
            ),
        )),
    }
}

/// The order pages follow (see the module docs).
pub fn resolve(
    labels: &[String],
    requested: Option<&OrderBy>,
    sql_order: &[OrderByExpr],
) -> Result<Order> {
    if let Some(order_by) = requested {
        let mut keys = Vec::new();
        for item in order_by.items().into_iter().filter(|s| !s.is_empty()) {
            let words: Vec<&str> = item.split_whitespace().collect();
            let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
            let (name, rest) = lower
                .split_first()
                .map_or(("", &[][..]), |(_, r)| (words[0], r));
            let name = name.trim_matches('"');
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            let (desc, nulls) = match rest.as_slice() {
                [] => (false, None),
                ["asc"] => (false, None),
                ["desc"] => (true, None),
                ["nulls", "first"] => (false, Some(true)),
                ["nulls", "last"] => (false, Some(false)),
                ["asc", "nulls", "first"] => (false, Some(true)),
                ["asc", "nulls", "last"] => (false, Some(false)),
                ["desc", "nulls", "first"] => (true, Some(true)),
                ["desc", "nulls", "last"] => (true, Some(false)),
                _ => {
                    return Err(bad(
                        "order_by",
                        format!(
                            "{item:?}: give a column, then optionally asc or desc and nulls first or nulls last"
                        ),
                    ));
                }
            };
            keys.push(SortColumn {
                index: column_index(labels, name)?,
                desc,
                nulls_first: nulls.unwrap_or(desc),
            });
        }
        if keys.is_empty() {
            return Err(bad("order_by", "name at least one result column"));
        }
        return Ok(Order::Keys(keys));
    }
    if !sql_order.is_empty() {
        let mut keys = Vec::new();
        for o in sql_order {
            let index = match &o.expr {
                Expr::Identifier(i) => column_index(labels, &i.value).ok(),
                Expr::CompoundIdentifier(parts) => parts
                    .last()
                    .and_then(|i| column_index(labels, &i.value).ok()),
                Expr::Value(Literal::Number(n, _)) => n
                    .to_string()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=labels.len()).contains(n))
                    .map(|n| n - 1),
                _ => None,
            };
            let Some(index) = index else {
                return Ok(Order::Positional);
            };
            let desc = o.asc == Some(false);
            keys.push(SortColumn {
                index,
                desc,
                nulls_first: o.nulls_first.unwrap_or(desc),
            });
        }
        return Ok(Order::Keys(keys));
    }
    Ok(Order::Keys(if labels.is_empty() {
        Vec::new()
    } else {
        vec![SortColumn {
            index: 0,
            desc: false,
            nulls_first: false,
        }]
    }))
}

/// What a cursor holds.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    /// Fingerprint of the query, parameters and order it belongs to.
    q: String,
    /// Sort values of the last row returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<Vec<SortKey>>,
    /// That row's digest, and how many rows equal to it were returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    h: Option<String>,
    #[serde(default)]
    n: usize,
    /// Whether some sort values in `k` were cut to a prefix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    p: bool,
    /// Positional cursors: rows returned so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    o: Option<usize>,
}

/// The fingerprint that ties a cursor to its query.
pub fn fingerprint(sql: &str, params: &Json, order_by: Option<&OrderBy>) -> String {
    let mut h = Sha256::new();
    h.update(sql.as_bytes());
    h.update([0]);
    h.update(params.to_string().as_bytes());
    h.update([0]);
    h.update(
        serde_json::to_string(&order_by)
            .unwrap_or_default()
            .as_bytes(),
    );
    to_hex(&h.finalize()[..8])
}

/// Longest text a cursor keeps of a sort value; a longer one is kept as its prefix.
const CURSOR_TEXT: usize = 256;

/// A sort value as a cursor holds it, and whether it was cut to a prefix.
fn cursor_key(k: &SortKey) -> (SortKey, bool) {
    let cut = |s: &str| {
        let mut end = CURSOR_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s[..end].to_string()
    };
    match k {
        SortKey::Text(s) if s.len() > CURSOR_TEXT => (SortKey::Text(cut(s)), true),
        SortKey::Other(s) if s.len() > CURSOR_TEXT => (SortKey::Other(cut(s)), true),
        other => (other.clone(), false),
    }
}

fn row_digest(row: &[Sql]) -> String {
    let json = Json::Array(row.iter().map(to_json).collect());
    to_hex(&Sha256::digest(json.to_string().as_bytes())[..12])
}

fn decode(cursor: &str, fingerprint: &str) -> Result<Cursor> {
    let invalid = || {
        bad(
            "cursor",
            "this is not a cursor query_sql returned; pass next_cursor from the previous page",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
    let c: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if c.q != fingerprint {
        return Err(bad(
            "cursor",
            "this cursor belongs to another query (or other params or order_by); run the same query with it, or drop it to start over",
        ));
    }
    Ok(c)
}

fn encode(c: &Cursor) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(c).unwrap_or_default())
}

/// One page of rows.
pub struct Page {
    pub rows: Vec<Vec<Json>>,
    pub next_cursor: Option<String>,
    pub truncated: bool,
}

struct Entry {
    keys: Vec<SortKey>,
    digest: Option<String>,
    row: usize,
}

fn compare_keys(a: &[SortKey], b: &[SortKey], columns: &[SortColumn]) -> Ordering {
    compare_to(a, b, columns, false)
}

/// Compares row keys `a` with `b`; with `prefixes`, a text of `b` matches every text of `a`
/// that starts with it (a cursor's cut values).
fn compare_to(a: &[SortKey], b: &[SortKey], columns: &[SortColumn], prefixes: bool) -> Ordering {
    for (i, c) in columns.iter().enumerate() {
        let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
            break;
        };
        if prefixes
            && let (SortKey::Text(s), SortKey::Text(p)) | (SortKey::Other(s), SortKey::Other(p)) =
                (x, y)
            && s.starts_with(p.as_str())
        {
            continue;
        }
        // NULL placement is given for the final order, so it is applied after a reversal.
        let o = match (x, y) {
            (SortKey::Null, _) | (_, SortKey::Null) => x.compare(y, c.nulls_first),
            _ if c.desc => x.compare(y, false).reverse(),
            _ => x.compare(y, false),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Sorts `rows`, finds where `cursor` left off, and cuts one page of at most `limit` rows and
/// `max_bytes` of JSON.
pub fn page(
    labels: &[String],
    rows: Vec<Vec<Sql>>,
    order: &Order,
    fingerprint: &str,
    cursor: Option<&str>,
    limit: usize,
    max_bytes: usize,
) -> Result<Page> {
    let cursor = cursor.map(|c| decode(c, fingerprint)).transpose()?;
    let (sorted, start, columns): (Vec<usize>, usize, &[SortColumn]) = match order {
        Order::Positional => {
            let start = match &cursor {
                Some(c) => c.o.ok_or_else(|| {
                    bad(
                        "cursor",
                        "this cursor belongs to another order; drop it to start over",
                    )
                })?,
                None => 0,
            };
            ((0..rows.len()).collect(), start, &[])
        }
        Order::Keys(columns) => {
            let mut entries: Vec<Entry> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| Entry {
                    keys: columns.iter().map(|c| SortKey::of(&r[c.index])).collect(),
                    digest: None,
                    row: i,
                })
                .collect();
            entries.sort_by(|a, b| compare_keys(&a.keys, &b.keys, columns));
            // Runs of equal keys are ordered by row digest.
            let mut i = 0;
            while i < entries.len() {
                let mut j = i + 1;
                while j < entries.len()
                    && compare_keys(&entries[i].keys, &entries[j].keys, columns) == Ordering::Equal
                {
                    j += 1;
                }
                if j - i > 1 {
                    for e in &mut entries[i..j] {
                        e.digest = Some(row_digest(&rows[e.row]));
                    }
                    entries[i..j].sort_by(|a, b| a.digest.cmp(&b.digest));
                }
                i = j;
            }
            let start = match &cursor {
                None => 0,
                Some(c) => {
                    let (Some(k), Some(h)) = (&c.k, &c.h) else {
                        return Err(bad(
                            "cursor",
                            "this cursor belongs to another order; drop it to start over",
                        ));
                    };
                    let lo = entries.partition_point(|e| {
                        compare_to(&e.keys, k, columns, c.p) == Ordering::Less
                    });
                    let hi = entries.partition_point(|e| {
                        compare_to(&e.keys, k, columns, c.p) != Ordering::Greater
                    });
                    let digest_of =
                        |e: &Entry| e.digest.clone().unwrap_or_else(|| row_digest(&rows[e.row]));
                    if c.p {
                        // Cut values: the rows in [lo, hi) share the prefixes and are ordered
                        // by their full values, so find the cursor's row itself by its digest
                        // (or start at the first of them if it is gone).
                        let mut seen = 0;
                        let mut s = lo;
                        for (i, e) in entries[lo..hi].iter().enumerate() {
                            if digest_of(e) == *h {
                                seen += 1;
                                if seen == c.n {
                                    s = lo + i + 1;
                                    break;
                                }
                            }
                        }
                        s
                    } else {
                        let mut s = lo;
                        while s < hi && digest_of(&entries[s]) < *h {
                            s += 1;
                        }
                        let mut skipped = 0;
                        while s < hi && skipped < c.n && digest_of(&entries[s]) == *h {
                            s += 1;
                            skipped += 1;
                        }
                        s
                    }
                }
            };
            (
                entries.iter().map(|e| e.row).collect(),
                start,
                columns.as_slice(),
            )
        }
    };
    let mut out = Vec::new();
    // Room for the columns, the other fields and the cursor (its values are cut to 256 bytes).
    let mut size = labels.iter().map(|l| l.len() + 3).sum::<usize>()
        + 200
        + columns.len() * (CURSOR_TEXT * 2 + 64);
    let mut truncated = false;
    let mut end = start;
    for &row in sorted.iter().skip(start).take(limit) {
        let json: Vec<Json> = rows[row].iter().map(to_json).collect();
        let bytes = Json::Array(json.clone()).to_string().len() + 1;
        if size + bytes > max_bytes {
            if out.is_empty() {
                return Err(bad(
                    "sql",
                    format!(
                        "one row of the result is {bytes} bytes, over the {max_bytes}-byte result limit; select fewer or shorter columns (e.g. SUBSTR(content, 1, 1000))"
                    ),
                ));
            }
            truncated = true;
            break;
        }
        size += bytes;
        out.push(json);
        end += 1;
    }
    let next_cursor = (end < sorted.len() && end > start).then(|| match order {
        Order::Positional => encode(&Cursor {
            q: fingerprint.to_string(),
            p: false,
            k: None,
            h: None,
            n: 0,
            o: Some(end),
        }),
        Order::Keys(_) => {
            let last = sorted[end - 1];
            let keys: Vec<SortKey> = columns
                .iter()
                .map(|c| SortKey::of(&rows[last][c.index]))
                .collect();
            let cut: Vec<(SortKey, bool)> = keys.iter().map(cursor_key).collect();
            let digest = row_digest(&rows[last]);
            // How many rows equal to the last one this page and the earlier ones returned.
            let mut n = 0;
            for &r in sorted[..end].iter().rev() {
                if row_digest(&rows[r]) == digest
                    && compare_keys(
                        &columns
                            .iter()
                            .map(|c| SortKey::of(&rows[r][c.index]))
                            .collect::<Vec<_>>(),
                        &keys,
                        columns,
                    ) == Ordering::Equal
                {
                    n += 1;
                } else {
                    break;
                }
            }
            encode(&Cursor {
                q: fingerprint.to_string(),
                p: cut.iter().any(|(_, c)| *c),
                k: Some(cut.into_iter().map(|(k, _)| k).collect()),
                h: Some(digest),
                n,
                o: None,
            })
        }
    });
    Ok(Page {
        rows: out,
        next_cursor,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_string()).collect()
    }

    fn all_pages(rows: &[Vec<Sql>], order: &Order, limit: usize) -> Vec<Vec<Json>> {
        let l = labels(&["a", "b"]);
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let p = page(
                &l,
                rows.to_vec(),
                order,
                "f",
                cursor.as_deref(),
                limit,
                1 << 20,
            )
            .unwrap();
            out.extend(p.rows);
            match p.next_cursor {
                Some(c) => cursor = Some(c),
                None => return out,
            }
        }
    }

    #[test]
    fn pages_cover_every_row_once_even_with_ties_and_duplicates() {
        let mut rows = Vec::new();
        for i in 0..57 {
            rows.push(vec![Sql::I64(i % 5), Sql::Str(format!("r{}", i % 13))]);
        }
        // Exact duplicates too.
        rows.push(rows[3].clone());
        rows.push(rows[3].clone());
        let order = resolve(
            &labels(&["a", "b"]),
            Some(&OrderBy::One("a desc".into())),
            &[],
        )
        .unwrap();
        for limit in [1, 4, 10, 100] {
            let got = all_pages(&rows, &order, limit);
            assert_eq!(got.len(), rows.len(), "limit {limit}");
            let mut want: Vec<Vec<Json>> = rows
                .iter()
                .map(|r| r.iter().map(to_json).collect())
                .collect();
            let mut seen = got.clone();
            want.sort_by_key(|r| r.iter().map(Json::to_string).collect::<Vec<_>>());
            seen.sort_by_key(|r| r.iter().map(Json::to_string).collect::<Vec<_>>());
            assert_eq!(seen, want, "limit {limit}");
            let a: Vec<i64> = got.iter().map(|r| r[0].as_i64().unwrap()).collect();
            assert!(a.windows(2).all(|w| w[0] >= w[1]), "descending: {a:?}");
        }
    }

    #[test]
    fn a_cursor_resumes_after_its_row_when_rows_change_in_between() {
        let l = labels(&["a", "b"]);
        let rows: Vec<Vec<Sql>> = (0..10).map(|i| vec![Sql::I64(i), Sql::Null]).collect();
        let order = resolve(&l, None, &[]).unwrap();
        let p = page(&l, rows.clone(), &order, "f", None, 4, 1 << 20).unwrap();
        // Row 1 disappears and -1 and 5.5 appear before the next page is read.
        let mut changed: Vec<Vec<Sql>> = rows.into_iter().filter(|r| r[0] != Sql::I64(1)).collect();
        changed.push(vec![Sql::I64(-1), Sql::Null]);
        changed.push(vec![Sql::F64(5.5), Sql::Null]);
        let next = page(
            &l,
            changed,
            &order,
            "f",
            p.next_cursor.as_deref(),
            100,
            1 << 20,
        )
        .unwrap();
        let firsts: Vec<String> = next.rows.iter().map(|r| r[0].to_string()).collect();
        assert_eq!(firsts, ["4", "5", "5.5", "6", "7", "8", "9"]);
    }

    #[test]
    fn long_sort_values_are_cut_in_the_cursor_and_still_resume_exactly() {
        let shared = "y".repeat(400);
        let rows: Vec<Vec<Sql>> = (0..9)
            .map(|i| vec![Sql::Str(format!("{shared}{}", i % 4)), Sql::I64(i)])
            .collect();
        let order = resolve(&labels(&["a", "b"]), None, &[]).unwrap();
        let got = all_pages(&rows, &order, 2);
        assert_eq!(got.len(), 9);
        let mut b: Vec<i64> = got.iter().map(|r| r[1].as_i64().unwrap()).collect();
        b.sort();
        assert_eq!(b, (0..9).collect::<Vec<_>>());
        let p = page(&labels(&["a", "b"]), rows, &order, "f", None, 2, 1 << 20).unwrap();
        assert!(
            p.next_cursor.unwrap().len() < 1000,
            "the cursor stays small"
        );
    }

    #[test]
    fn cursors_are_checked() {
        let l = labels(&["a"]);
        let order = resolve(&l, None, &[]).unwrap();
        let rows: Vec<Vec<Sql>> = (0..3).map(|i| vec![Sql::I64(i)]).collect();
        let p = page(&l, rows.clone(), &order, "f", None, 1, 1 << 20).unwrap();
        let err = page(
            &l,
            rows.clone(),
            &order,
            "g",
            p.next_cursor.as_deref(),
            1,
            1 << 20,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("another query"), "{err}");
        let err = page(&l, rows, &order, "f", Some("nonsense!"), 1, 1 << 20)
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a cursor"), "{err}");
    }

    #[test]
    fn the_byte_limit_cuts_a_page_and_the_cursor_continues() {
        let l = labels(&["a"]);
        let order = resolve(&l, None, &[]).unwrap();
        let rows: Vec<Vec<Sql>> = (0..10)
            .map(|i| vec![Sql::Str(format!("{i}{}", "x".repeat(100)))])
            .collect();
        let p = page(&l, rows.clone(), &order, "f", None, 100, 1150).unwrap();
        assert!(p.truncated);
        assert_eq!(p.rows.len(), 3);
        let rest = page(
            &l,
            rows,
            &order,
            "f",
            p.next_cursor.as_deref(),
            100,
            1 << 20,
        )
        .unwrap();
        assert_eq!(rest.rows.len(), 7);
        assert!(!rest.truncated && rest.next_cursor.is_none());
    }

    #[test]
    fn order_by_names_result_columns() {
        let l = labels(&["type", "n", "n"]);
        let err = resolve(&l, Some(&OrderBy::One("nope".into())), &[]).unwrap_err();
        assert!(err.to_string().contains("type, n, n"), "{err}");
        let err = resolve(&l, Some(&OrderBy::One("n".into())), &[]).unwrap_err();
        assert!(err.to_string().contains("two result columns"), "{err}");
        let err = resolve(&l, Some(&OrderBy::One("type sideways".into())), &[]).unwrap_err();
        assert!(err.to_string().contains("asc or desc"), "{err}");
        assert!(matches!(
            resolve(&l, Some(&OrderBy::Many(vec!["type desc nulls last".into()])), &[]),
            Ok(Order::Keys(k)) if k.len() == 1 && k[0].desc && !k[0].nulls_first
        ));
    }
}
