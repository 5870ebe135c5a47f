//! The most bytes each value of a query can take, worked out from its syntax before anything
//! runs. SQL functions can build values far larger than what they read (`REPEAT`, `LPAD`,
//! `REPLACE`, and any of them nested in another), and the engine allocates a value whole, so the
//! bound has to hold before the allocation: a query whose values could outgrow it is refused,
//! naming the limit.
//!
//! A value's bound is `data × D + bytes`: `data` copies of what the query reads (a column or
//! a parameter, each at most the largest value stored, `D`) and `bytes` of text the query makes
//! up itself (literals, padding). Every expression must stay within [`MAX_DATA_COPIES`] copies
//! and [`MAX_MADE_BYTES`] made-up bytes, and so must the sum of one `SELECT`'s outputs. What a
//! query holds across rows (sorts, groups) is bounded separately, while it runs
//! (`store::Guard`, by the memory meter).

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem,
    Value as Literal,
};

use lore_base::error::{LoreError, Result};

/// Copies of read data one value may hold (concatenating 16 columns, or `REPEAT(col, 16)`).
pub const MAX_DATA_COPIES: u64 = 16;
/// Bytes of text a value may make up from the query's own literals (`REPEAT('ab', 1000)`).
pub const MAX_MADE_BYTES: u64 = 1 << 20;
/// The same two limits for the sum of one `SELECT`'s output columns.
pub const MAX_ROW_DATA_COPIES: u64 = 64;
pub const MAX_ROW_MADE_BYTES: u64 = 4 << 20;

/// The bound of one value: `data` copies of read data plus `bytes` made up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bound {
    pub data: u64,
    pub bytes: u64,
}

impl Bound {
    const SCALAR: Bound = Bound { data: 0, bytes: 64 };
    const DATA: Bound = Bound { data: 1, bytes: 0 };

    fn plus(self, other: Bound) -> Bound {
        Bound {
            data: self.data.saturating_add(other.data),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    fn times(self, n: u64) -> Bound {
        Bound {
            data: self.data.saturating_mul(n),
            bytes: self.bytes.saturating_mul(n),
        }
    }

    fn max(self, other: Bound) -> Bound {
        Bound {
            data: self.data.max(other.data),
            bytes: self.bytes.max(other.bytes),
        }
    }

    fn within(self, data: u64, bytes: u64) -> bool {
        self.data <= data && self.bytes <= bytes
    }
}

fn refuse(what: &str) -> LoreError {
    LoreError::invalid(
        "sql",
        format!(
            "{what}: lore bounds every value a query builds to {MAX_DATA_COPIES} copies of the data it reads plus {} KiB of text made up by the query (and a row's values to {MAX_ROW_DATA_COPIES} copies plus {} MiB), before it runs; build smaller values",
            MAX_MADE_BYTES >> 10,
            MAX_ROW_MADE_BYTES >> 20
        ),
    )
}

/// Checks one expression (every node in it) and returns its bound.
pub fn check(expr: &Expr) -> Result<Bound> {
    let b = bound(expr)?;
    if !b.within(MAX_DATA_COPIES, MAX_MADE_BYTES) {
        return Err(refuse(&format!(
            "{} could build a value of {} copies of the data it reads plus {} bytes",
            short(expr),
            b.data,
            b.bytes
        )));
    }
    Ok(b)
}

/// Checks the sum of a `SELECT`'s outputs.
pub fn check_row(items: &[SelectItem]) -> Result<()> {
    let mut row = Bound::default();
    for item in items {
        row = row.plus(match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => check(e)?,
            // Stored columns as they are.
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Bound::DATA,
        });
    }
    if !row.within(MAX_ROW_DATA_COPIES, MAX_ROW_MADE_BYTES) {
        return Err(refuse(&format!(
            "one row of this SELECT could hold {} copies of the data it reads plus {} bytes",
            row.data, row.bytes
        )));
    }
    Ok(())
}

fn short(expr: &Expr) -> String {
    let text = expr.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    format!("{}…", text.chars().take(60).collect::<String>())
}

fn args_of(args: &FunctionArguments) -> Vec<&Expr> {
    match args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
                | FunctionArg::Named {
                    arg: FunctionArgExpr::Expr(e),
                    ..
                } => Some(e),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A literal count: a non-negative integer written in the query.
fn literal_count(e: Option<&&Expr>, name: &str) -> Result<u64> {
    let mut e = e.copied();
    while let Some(Expr::Nested(inner)) = e {
        e = Some(inner);
    }
    match e {
        Some(Expr::Value(Literal::Number(n, _))) => n
            .to_string()
            .parse::<u64>()
            .map_err(|_| refuse(&format!("{name}'s length {n} is not a whole number"))),
        _ => Err(refuse(&format!(
            "{name} takes a length written as a number in the query (not a column, parameter or expression)"
        ))),
    }
}

/// The length of a string literal, if `e` is one.
fn literal_len(e: Option<&&Expr>) -> Option<u64> {
    match e.copied() {
        Some(Expr::Value(
            Literal::SingleQuotedString(s)
            | Literal::DoubleQuotedString(s)
            | Literal::EscapedStringLiteral(s)
            | Literal::NationalStringLiteral(s),
        )) => Some(s.len() as u64),
        _ => None,
    }
}

fn bound(expr: &Expr) -> Result<Bound> {
    Ok(match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => Bound::DATA,
        Expr::Value(v) => match v {
            Literal::SingleQuotedString(s)
            | Literal::DoubleQuotedString(s)
            | Literal::EscapedStringLiteral(s)
            | Literal::NationalStringLiteral(s)
            | Literal::HexStringLiteral(s)
            | Literal::SingleQuotedByteStringLiteral(s)
            | Literal::DoubleQuotedByteStringLiteral(s) => Bound {
                data: 0,
                bytes: s.len() as u64,
            },
            // `$1`: a parameter is data the caller sent.
            Literal::Placeholder(_) => Bound::DATA,
            _ => Bound::SCALAR,
        },
        Expr::Nested(e) | Expr::Cast { expr: e, .. } | Expr::Collate { expr: e, .. } => check(e)?,
        Expr::UnaryOp { expr, .. } => check(expr)?,
        Expr::BinaryOp { left, op, right } => {
            if matches!(
                op,
                BinaryOperator::PGRegexMatch
                    | BinaryOperator::PGRegexIMatch
                    | BinaryOperator::PGRegexNotMatch
                    | BinaryOperator::PGRegexNotIMatch
            ) {
                check_regex(right)?;
            }
            let (l, r) = (check(left)?, check(right)?);
            match op {
                BinaryOperator::StringConcat => l.plus(r),
                // Arithmetic, comparison, logic: a scalar.
                _ => Bound::SCALAR,
            }
        }
        Expr::Substring { expr, .. } | Expr::Trim { expr, .. } => check(expr)?,
        Expr::Case {
            operand,
            conditions,
            results,
            else_result,
        } => {
            if let Some(o) = operand {
                check(o)?;
            }
            for c in conditions {
                check(c)?;
            }
            let mut out = Bound::default();
            for r in results.iter().chain(else_result.as_deref()) {
                out = out.max(check(r)?);
            }
            out
        }
        Expr::Tuple(items) | Expr::Array(sqlparser::ast::Array { elem: items, .. }) => {
            let mut out = Bound::default();
            for e in items {
                out = out.plus(check(e)?);
            }
            out
        }
        Expr::Function(f) => function(&f.name.to_string().to_ascii_uppercase(), &args_of(&f.args))?,
        // Anything else yields a scalar (a comparison, a test, a number) or passes on what it
        // reads; its own sub-expressions are checked where they stand.
        _ => Bound::DATA,
    })
}

/// Longest regular expression a query may match with (`~`, `~*`, `!~`, `!~*`).
pub const MAX_REGEX_BYTES: usize = 256;

/// The engine compiles a `~` pattern again for every row it tests: the pattern must be a short
/// literal, so that each compilation is small and the query's row and time budgets bound the
/// rest (matching itself is linear: the `regex` crate).
fn check_regex(pattern: &Expr) -> Result<()> {
    match literal_len(Some(&pattern)) {
        Some(n) if n as usize <= MAX_REGEX_BYTES => Ok(()),
        Some(n) => Err(LoreError::invalid(
            "sql",
            format!("a regular expression of {n} bytes; the limit is {MAX_REGEX_BYTES}"),
        )),
        None => Err(LoreError::invalid(
            "sql",
            "the pattern of ~ must be a string written in the query (it is compiled for every row); match a column against a literal pattern",
        )),
    }
}

fn function(name: &str, args: &[&Expr]) -> Result<Bound> {
    let mut bounds = Vec::with_capacity(args.len());
    for a in args {
        bounds.push(check(a)?);
    }
    let arg = |i: usize| bounds.get(i).copied().unwrap_or_default();
    let sum = bounds.iter().fold(Bound::default(), |a, b| a.plus(*b));
    Ok(match name {
        "REPEAT" => arg(0).times(literal_count(args.get(1), name)?),
        // The result is `n` characters (the text is cut or padded to it), UTF-8: 4n bytes.
        "LPAD" | "RPAD" => Bound {
            data: 0,
            bytes: literal_count(args.get(1), name)?.saturating_mul(4),
        },
        "REPLACE" => {
            let (text, with) = (arg(0), arg(2));
            if with.data > 0 {
                return Err(refuse(&format!(
                    "{name} with a replacement read from the data can build values as large as the data squared"
                )));
            }
            // Each occurrence of `from` (at least its length, 1 byte if it is not a literal
            // or empty) becomes `with`.
            let from = literal_len(args.get(1)).filter(|l| *l > 0).unwrap_or(1);
            text.times(1 + with.bytes.div_ceil(from))
        }
        "CONCAT" | "CONCAT_WS" | "APPEND" | "PREPEND" | "SPLICE" | "COALESCE" | "IFNULL"
        | "NULLIF" | "GREATEST" => {
            if name == "CONCAT_WS" && bounds.len() > 2 {
                // The separator goes between every pair of the others.
                sum.plus(arg(0).times(bounds.len() as u64 - 2))
            } else {
                sum
            }
        }
        // Case mapping can turn one character into three (ß → SS, ŉ → ʼN in more bytes).
        "UPPER" | "LOWER" | "INITCAP" => arg(0).times(3),
        "HEX" => arg(0).times(2),
        // Date and number formatting: a short pattern can expand (`%A` is a weekday name).
        "FORMAT" | "TO_CHAR" => sum.times(8),
        // Everything else returns no more than it reads (substrings, trims, lists of what it
        // is given) or a scalar.
        _ => sum.max(Bound::SCALAR),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::dialect::PostgreSqlDialect;
    use sqlparser::parser::Parser;

    fn expr(sql: &str) -> Expr {
        Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_expr()
            .unwrap()
    }

    #[test]
    fn values_within_the_bounds_pass() {
        for sql in [
            "name",
            "name || ' ' || kind",
            "REPEAT('ab', 1000)",
            "LPAD(name, 20, '.')",
            "UPPER(content)",
            "REPLACE(content, 'a', 'bb')",
            "CONCAT(a, b, c, d, e, f, g, h)",
            "REPEAT(name, 4) || REPEAT(name, 4)",
            "CASE WHEN x THEN REPEAT('a', 100) ELSE name END",
            "SUBSTR(REPEAT(name, 10), 1, 5)",
        ] {
            assert!(check(&expr(sql)).is_ok(), "{sql}");
        }
    }

    #[test]
    fn regex_patterns_are_short_literals() {
        assert!(check(&expr("name ~ '^a.*b$'")).is_ok());
        assert!(check(&expr("name !~* 'x'")).is_ok());
        for sql in ["name ~ other", "name ~ $1", "name ~* REPEAT('a', 10)"] {
            let e = check(&expr(sql)).expect_err(sql).to_string();
            assert!(e.contains("string written in the query"), "{sql}: {e}");
        }
        let long = format!("name ~ '{}'", "a".repeat(300));
        assert!(
            check(&expr(&long))
                .unwrap_err()
                .to_string()
                .contains("limit is 256")
        );
    }

    #[test]
    fn values_that_could_outgrow_the_bounds_are_refused_before_they_run() {
        for sql in [
            // The probe: nesting multiplies past any per-literal limit.
            "REPEAT(REPEAT('x', 65536), 65536)",
            "REPEAT(REPEAT(REPEAT('ab', 100), 100), 100)",
            "LPAD(LPAD('x', 65536), 1000000)",
            "LPAD('x', 1000000)",
            "RPAD(name, 300000, 'y')",
            "REPEAT(name, 17)",
            "REPEAT(name, n)",
            "REPEAT(name, $1)",
            "REPEAT(name, 2 * 3)",
            "REPLACE(REPLACE(REPLACE(content, 'a', 'aaaaaaaa'), 'a', 'aaaaaaaa'), 'a', 'aaaaaaaa')",
            "REPLACE(content, '', REPEAT('x', 100))",
            "REPLACE(content, 'a', content)",
            "UPPER(UPPER(UPPER(REPEAT(name, 2))))",
            "CONCAT(REPEAT('x', 600000), REPEAT('y', 600000))",
            "REPEAT('x', 600000) || REPEAT('x', 600000)",
            "CAST(REPEAT(REPEAT('x', 2000), 2000) AS TEXT)",
            "(REPEAT((REPEAT('x', 2000)), 2000))",
            "CASE WHEN a THEN name ELSE REPEAT(REPEAT('q', 5000), 5000) END",
            "COALESCE(NULL, REPEAT(REPEAT('q', 5000), 5000))",
            "HEX(HEX(HEX(HEX(REPEAT(name, 2)))))",
        ] {
            let e = check(&expr(sql)).expect_err(sql);
            assert!(e.to_string().contains("copies of the data"), "{sql}: {e}");
        }
    }
}
