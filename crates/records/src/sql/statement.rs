//! The query before it runs: parsed once, refused unless it is one read-only `SELECT` (or
//! `WITH … SELECT`), and walked for what the engine needs first: the tables it names, the
//! common table expressions to materialize, the identifiers and aliases (to name an unknown
//! column before any row is read), and the top-level `ORDER BY` that pagination follows.
//!
//! Nothing here rewrites query text: the checks run on the syntax tree, and the store behind
//! the engine has no write path either.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, ObjectName, OrderByExpr, Query, Select, SelectItem, SetExpr, Statement,
    TableFactor, Value as Literal, Visit, Visitor,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use lore_base::error::{LoreError, Result};

/// Longest query text accepted.
pub const MAX_SQL_BYTES: usize = 16 * 1024;

/// A common table expression, run before the main query and stored as a table.
pub struct Cte {
    pub name: String,
    /// Column names given in `name(a, b) AS (...)`, if any.
    pub columns: Vec<String>,
    pub query: Statement,
}

/// A checked read-only query.
pub struct ReadQuery {
    /// The main query, without its `WITH`.
    pub main: Statement,
    pub ctes: Vec<Cte>,
    /// Every one-part table name in the query, in first-seen order (CTE names included).
    pub relations: Vec<String>,
    /// Column names the query uses (the last part of compound names).
    pub identifiers: BTreeSet<String>,
    /// Names the query itself defines: select aliases, table aliases and their columns.
    pub aliases: BTreeSet<String>,
    /// Whether some part selects `*` or joins by `USING`/`NATURAL` (columns named nowhere).
    pub wildcard: bool,
    /// The main query's own `ORDER BY`.
    pub order_by: Vec<OrderByExpr>,
    /// Conditions on `entities.type` that every row the query can use must meet, each a list
    /// of alternatives (`type = 'a'` is `[a]`, `type IN ('a', 'b')` is `[a, b]`); empty when
    /// none is certain. See [`entity_type_filter`].
    pub entity_types: Vec<Vec<Lit>>,
}

/// A literal a pushed-down condition compares with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lit {
    Text(String),
    /// `$n`, as the index into the query's params (`$1` is 0).
    Param(usize),
}

fn bad(message: impl Into<String>) -> LoreError {
    LoreError::invalid("sql", message)
}

/// Parses `sql` and refuses anything but one read-only query.
pub fn parse(sql: &str) -> Result<ReadQuery> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(bad(format!(
            "the query is {} bytes; the limit is {MAX_SQL_BYTES}",
            sql.len()
        )));
    }
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).map_err(|e| {
        bad(format!(
            "{e}; query_sql only reads: it takes one SELECT (joins, aggregates, WITH, ORDER BY)"
        ))
    })?;
    if statements.len() != 1 {
        return Err(bad(if statements.is_empty() {
            "the query is empty; give one SELECT".to_string()
        } else {
            format!(
                "query_sql runs one statement per call; this has {}. Nothing was run",
                statements.len()
            )
        }));
    }
    let statement = statements.remove(0);
    let Statement::Query(mut query) = statement else {
        return Err(bad(format!(
            "query_sql only reads: {} is refused and nothing was run. Use SELECT (or WITH … SELECT); change data with run_sdk",
            statement_kind(&statement)
        )));
    };
    refuse_writes(&query.body)?;
    let mut walk = Walk::default();
    if let ControlFlow::Break(e) = query.visit(&mut walk) {
        return Err(e);
    }
    // Every value the query can build is bounded before anything runs.
    super::bound::check_query(&query)?;
    let entity_types = entity_type_filter(&query);
    let mut ctes = Vec::new();
    if let Some(with) = query.with.take() {
        if with.recursive {
            return Err(bad("WITH RECURSIVE is not supported; use plain WITH"));
        }
        for cte in with.cte_tables {
            ctes.push(Cte {
                name: cte.alias.name.value,
                columns: cte.alias.columns.into_iter().map(|c| c.value).collect(),
                query: Statement::Query(cte.query),
            });
        }
    }
    let order_by = query
        .order_by
        .as_ref()
        .map(|o| o.exprs.clone())
        .unwrap_or_default();
    Ok(ReadQuery {
        main: Statement::Query(query),
        ctes,
        relations: walk.relations,
        identifiers: walk.identifiers,
        aliases: walk.aliases,
        wildcard: walk.wildcard,
        order_by,
        entity_types,
    })
}

/// The conditions on `entities.type` that can be pushed into loading the table, read from the
/// syntax tree (never from text). GlueSQL still evaluates the whole `WHERE`, so pushing a
/// condition only leaves out rows that could never be part of the result; it must therefore
/// be certain. A condition is pushed only when all of these hold:
///
/// - `entities` is named exactly once in the whole query (subqueries and `WITH` included: the
///   loaded table is shared by every reference) and no `WITH` table is named `entities`;
/// - that reference is a plain table of a `SELECT`'s `FROM` (or of a join there), without
///   column aliases, and the `SELECT` gives no output column the name `type`;
/// - the condition is one of the `AND`-ed terms of that `SELECT`'s `WHERE` (not under `OR`,
///   `NOT`, `CASE`, or in `ON`/`HAVING`): `type = 'lit'`, `'lit' = type`, `type = $n` or
///   `type IN ('a', $n, ...)`, where `type` is qualified by the table's alias (or
///   `entities`), or unqualified when that table is the `SELECT`'s only one.
///
/// A `WHERE` term rejects every row (or joined row, whatever the join) whose entity fails it,
/// since `type` is never NULL; so rows of other types can be left out of the table.
pub fn entity_type_filter(query: &Query) -> Vec<Vec<Lit>> {
    #[derive(Default)]
    struct Find {
        references: usize,
        cte_named: bool,
        selects: usize,
        found: Vec<Vec<Lit>>,
    }
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if let Some(with) = &query.with {
                self.cte_named |= with
                    .cte_tables
                    .iter()
                    .any(|c| c.alias.name.value == ENTITIES);
            }
            if let SetExpr::Select(select) = query.body.as_ref()
                && let Some(found) = select_filter(select)
            {
                self.selects += 1;
                self.found = found;
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, .. } = factor
                && is_entities(name)
            {
                self.references += 1;
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find::default();
    let _ = query.visit(&mut find);
    if find.references == 1 && find.selects == 1 && !find.cte_named {
        find.found
    } else {
        Vec::new()
    }
}

const ENTITIES: &str = "entities";

fn is_entities(name: &ObjectName) -> bool {
    name.0.len() == 1 && name.0[0].value == ENTITIES
}

/// If `select` reads `entities` directly in its `FROM`, the `type` conditions of its `WHERE`
/// (possibly none).
fn select_filter(select: &Select) -> Option<Vec<Vec<Lit>>> {
    let mut reference = None;
    for from in &select.from {
        let only = select.from.len() == 1 && from.joins.is_empty();
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            if let TableFactor::Table { name, alias, .. } = factor
                && is_entities(name)
            {
                reference = Some((alias, only));
            }
        }
    }
    let (alias, only) = reference?;
    if alias.as_ref().is_some_and(|a| !a.columns.is_empty())
        || select.projection.iter().any(
            |item| matches!(item, SelectItem::ExprWithAlias { alias, .. } if alias.value == "type"),
        )
    {
        return Some(Vec::new());
    }
    let qualifier = alias.as_ref().map_or(ENTITIES, |a| a.name.value.as_str());
    let is_type = |e: &Expr| match unnest(e) {
        Expr::Identifier(i) => only && i.value == "type",
        Expr::CompoundIdentifier(parts) => {
            parts.len() == 2 && parts[0].value == qualifier && parts[1].value == "type"
        }
        _ => false,
    };
    let mut terms = Vec::new();
    if let Some(selection) = &select.selection {
        conjuncts(selection, &mut terms);
    }
    let mut found = Vec::new();
    for term in terms {
        match term {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::Eq,
                right,
            } => {
                let lit = if is_type(left) {
                    literal(right)
                } else if is_type(right) {
                    literal(left)
                } else {
                    None
                };
                if let Some(lit) = lit {
                    found.push(vec![lit]);
                }
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } if is_type(expr) => {
                if let Some(lits) = list.iter().map(literal).collect::<Option<Vec<_>>>() {
                    found.push(lits);
                }
            }
            _ => {}
        }
    }
    Some(found)
}

fn unnest(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

/// The terms of `a AND b AND ...`, through parentheses.
fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match unnest(e) {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        other => out.push(other),
    }
}

fn literal(e: &Expr) -> Option<Lit> {
    match unnest(e) {
        Expr::Value(Literal::SingleQuotedString(s)) => Some(Lit::Text(s.clone())),
        Expr::Value(Literal::Placeholder(p)) => p
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| n.checked_sub(1))
            .map(Lit::Param),
        _ => None,
    }
}

/// `INSERT`, `CREATE TABLE`, `DROP INDEX`...: the statement's leading keywords.
fn statement_kind(statement: &Statement) -> String {
    let text = statement.to_string();
    let mut words = text.split_whitespace().map(str::to_ascii_uppercase);
    let first = words.next().unwrap_or_default();
    match first.as_str() {
        "CREATE" | "DROP" | "ALTER" => {
            let second = words
                .find(|w| !["OR", "REPLACE", "TEMPORARY", "TEMP", "UNIQUE"].contains(&w.as_str()))
                .unwrap_or_default();
            format!("{first} {second}")
        }
        _ => first,
    }
}

fn refuse_writes(body: &SetExpr) -> Result<()> {
    match body {
        SetExpr::Select(select) if select.into.is_some() => Err(bad(
            "SELECT INTO writes a table and is refused; query_sql only reads",
        )),
        SetExpr::Insert(_) | SetExpr::Update(_) => Err(bad(
            "query_sql only reads: INSERT and UPDATE are refused and nothing was run",
        )),
        SetExpr::Query(q) => refuse_writes(&q.body),
        SetExpr::SetOperation { left, right, .. } => {
            refuse_writes(left)?;
            refuse_writes(right)
        }
        _ => Ok(()),
    }
}

#[derive(Default)]
struct Walk {
    depth: usize,
    relations: Vec<String>,
    identifiers: BTreeSet<String>,
    aliases: BTreeSet<String>,
    wildcard: bool,
}

impl Walk {
    fn relation(&mut self, name: &ObjectName) -> ControlFlow<LoreError> {
        if name.0.len() != 1 {
            return ControlFlow::Break(bad(format!(
                "{name} names a schema or database; tables here have one-part names (entities, events, ...) and hold only this org's rows"
            )));
        }
        let table = name.0[0].value.clone();
        if !self.relations.contains(&table) {
            self.relations.push(table);
        }
        ControlFlow::Continue(())
    }
}

impl Visitor for Walk {
    type Break = LoreError;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<LoreError> {
        if let Some(with) = &query.with {
            if self.depth > 0 {
                return ControlFlow::Break(bad(
                    "WITH is supported at the start of the query only, not inside a subquery",
                ));
            }
            for cte in &with.cte_tables {
                self.aliases.insert(cte.alias.name.value.clone());
                self.aliases
                    .extend(cte.alias.columns.iter().map(|c| c.value.clone()));
            }
        }
        if !query.locks.is_empty() {
            return ControlFlow::Break(bad(
                "FOR UPDATE / FOR SHARE lock rows and are refused; query_sql only reads",
            ));
        }
        if let Err(e) = refuse_writes(&query.body) {
            return ControlFlow::Break(e);
        }
        self.wildcard |= collect_select_aliases(&query.body, &mut self.aliases);
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<LoreError> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<LoreError> {
        match factor {
            TableFactor::Table {
                name, args, alias, ..
            } => {
                if args.is_some() {
                    return ControlFlow::Break(bad(format!(
                        "{name}(...) is a table function; query_sql reads the org's tables only"
                    )));
                }
                if let Some(a) = alias {
                    self.aliases.insert(a.name.value.clone());
                    self.aliases
                        .extend(a.columns.iter().map(|c| c.value.clone()));
                }
                self.relation(name)
            }
            TableFactor::Derived { alias, .. } => {
                if let Some(a) = alias {
                    self.aliases.insert(a.name.value.clone());
                    self.aliases
                        .extend(a.columns.iter().map(|c| c.value.clone()));
                }
                ControlFlow::Continue(())
            }
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<LoreError> {
        match expr {
            Expr::Identifier(ident) => {
                self.identifiers.insert(ident.value.clone());
            }
            Expr::CompoundIdentifier(idents) => {
                if let Some(last) = idents.last() {
                    self.identifiers.insert(last.value.clone());
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Collects the select aliases of a query body; returns whether it selects `*` or joins by
/// `USING`/`NATURAL`.
fn collect_select_aliases(body: &SetExpr, aliases: &mut BTreeSet<String>) -> bool {
    match body {
        SetExpr::Select(select) => {
            let mut wildcard = false;
            for item in &select.projection {
                match item {
                    SelectItem::ExprWithAlias { alias, .. } => {
                        aliases.insert(alias.value.clone());
                    }
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => wildcard = true,
                    SelectItem::UnnamedExpr(_) => {}
                }
            }
            for from in &select.from {
                for join in &from.joins {
                    let op = format!("{:?}", join.join_operator);
                    wildcard |= op.contains("Using") || op.contains("Natural");
                }
            }
            wildcard
        }
        SetExpr::Query(q) => collect_select_aliases(&q.body, aliases),
        SetExpr::SetOperation { left, right, .. } => {
            let l = collect_select_aliases(left, aliases);
            collect_select_aliases(right, aliases) || l
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(sql: &str) -> String {
        match parse(sql) {
            Err(LoreError::InvalidArgument { message, .. }) => message,
            Err(other) => panic!("{sql}: unexpected {other:?}"),
            Ok(_) => panic!("{sql} was accepted"),
        }
    }

    #[test]
    fn only_one_read_only_query_is_accepted() {
        for (sql, says) in [
            (
                "INSERT INTO entities (id) VALUES ('x')",
                "INSERT is refused",
            ),
            ("UPDATE entities SET name = 'x'", "UPDATE is refused"),
            ("DELETE FROM entities", "DELETE is refused"),
            ("CREATE TABLE t (a INT)", "CREATE TABLE is refused"),
            (
                "CREATE INDEX i ON entities (name)",
                "CREATE INDEX is refused",
            ),
            ("DROP TABLE entities", "DROP TABLE is refused"),
            (
                "ALTER TABLE entities ADD COLUMN x INT",
                "ALTER TABLE is refused",
            ),
            ("TRUNCATE entities", "TRUNCATE is refused"),
            ("BEGIN", "is refused"),
            (
                "SELECT 1; DELETE FROM entities",
                "one statement per call; this has 2",
            ),
            ("SELECT 1; SELECT 2", "this has 2"),
            ("", "empty"),
            ("SELECT * INTO t FROM entities", "SELECT INTO"),
            ("SELECT * FROM entities FOR UPDATE", "FOR UPDATE"),
            ("SELECT * FROM other.entities", "one-part names"),
            ("SELECT * FROM \"o/acme\".entities", "one-part names"),
            ("SELECT * FROM SERIES(1000000000)", "table function"),
            (
                "WITH RECURSIVE t AS (SELECT 1) SELECT * FROM t",
                "RECURSIVE",
            ),
            (
                "SELECT * FROM (WITH t AS (SELECT 1) SELECT * FROM t) x",
                "WITH is supported",
            ),
            ("SELECT REPEAT('x', 1000000000)", "copies of the data"),
            ("SELECT LPAD('x', n) FROM t", "LPAD takes a length written"),
            (
                "SELECT REPEAT(REPEAT('x', 65536), 65536)",
                "copies of the data",
            ),
            (
                "SELECT a FROM t WHERE REPEAT(REPEAT(a, 100), 100) = ''",
                "copies of the data",
            ),
            (
                "SELECT x FROM (SELECT REPEAT(REPEAT('x', 9000), 9000) AS x) s",
                "copies of the data",
            ),
            (
                "SELECT REPEAT(c, 10), REPEAT(c, 10), REPEAT(c, 10), REPEAT(c, 10), REPEAT(c, 10), REPEAT(c, 10), REPEAT(c, 10) FROM t",
                "one row",
            ),
        ] {
            let message = refused(sql);
            assert!(message.contains(says), "{sql}: {message}");
        }
    }

    #[test]
    fn finds_tables_ctes_identifiers_and_order() {
        let q = parse(
            "WITH open AS (SELECT id, name AS title FROM ticket WHERE status = 'open') \
             SELECT o.title, r.type FROM open o JOIN relationships r ON r.from_id = o.id \
             WHERE EXISTS (SELECT 1 FROM events e WHERE e.kind = 'fact') ORDER BY title DESC",
        )
        .unwrap();
        assert_eq!(q.relations, ["ticket", "open", "relationships", "events"]);
        assert_eq!(q.ctes.len(), 1);
        assert_eq!(q.ctes[0].name, "open");
        assert!(q.identifiers.contains("status") && q.identifiers.contains("from_id"));
        assert!(q.aliases.contains("title") && q.aliases.contains("o"));
        assert_eq!(q.order_by.len(), 1);
        assert_eq!(q.order_by[0].asc, Some(false));
        assert!(!q.wildcard);
        assert!(parse("SELECT COUNT(*) FROM entities").is_ok_and(|q| !q.wildcard));
        for sql in [
            "SELECT * FROM entities",
            "SELECT e.* FROM entities e",
            "SELECT id FROM (SELECT * FROM entities) t",
            "SELECT e.id FROM entities e JOIN ticket t USING (id)",
        ] {
            assert!(parse(sql).unwrap().wildcard, "{sql}");
        }
    }

    #[test]
    fn type_conditions_are_pushed_only_when_certain() {
        let text = |s: &str| Lit::Text(s.to_string());
        let pushed = |sql: &str| parse(sql).unwrap().entity_types;
        for (sql, want) in [
            (
                "SELECT * FROM entities WHERE type = 'a'",
                vec![vec![text("a")]],
            ),
            (
                "SELECT * FROM entities WHERE 'a' = type",
                vec![vec![text("a")]],
            ),
            (
                "SELECT * FROM entities WHERE (type = 'a') AND name > 'x' AND type IN ('a', $2)",
                vec![vec![text("a")], vec![text("a"), Lit::Param(1)]],
            ),
            (
                "SELECT * FROM entities e JOIN relationships r ON r.from_id = e.id WHERE e.type = 'a'",
                vec![vec![text("a")]],
            ),
            (
                "SELECT COUNT(*) FROM relationships WHERE from_id IN (SELECT id FROM entities WHERE type = 'a')",
                vec![vec![text("a")]],
            ),
            (
                "WITH t AS (SELECT * FROM entities WHERE entities.type = 'a') SELECT * FROM t",
                vec![vec![text("a")]],
            ),
        ] {
            assert_eq!(pushed(sql), want, "{sql}");
        }
        for sql in [
            "SELECT * FROM entities",
            "SELECT * FROM entities WHERE type = 'a' OR name = 'b'",
            "SELECT * FROM entities WHERE NOT type = 'a'",
            "SELECT * FROM entities WHERE NOT (type = 'a' AND name = 'b')",
            "SELECT * FROM entities WHERE type <> 'a'",
            "SELECT * FROM entities WHERE type NOT IN ('a')",
            "SELECT * FROM entities WHERE type IN ('a', name)",
            "SELECT * FROM entities WHERE type = name",
            "SELECT * FROM entities WHERE type = 1",
            "SELECT * FROM entities WHERE CASE WHEN type = 'a' THEN TRUE ELSE FALSE END",
            "SELECT * FROM entities WHERE type LIKE 'a'",
            // A join: `type` alone may be another table's column.
            "SELECT * FROM entities e JOIN relationships r ON r.from_id = e.id WHERE type = 'a'",
            "SELECT * FROM entities e JOIN relationships r ON r.from_id = e.id WHERE r.type = 'a'",
            "SELECT * FROM relationships r LEFT JOIN entities e ON r.from_id = e.id AND e.type = 'a'",
            "SELECT * FROM entities e WHERE x.type = 'a'",
            "SELECT * FROM entities e(a, b) WHERE e.type = 'a'",
            "SELECT name AS type FROM entities WHERE type = 'a'",
            // Named twice: the loaded table is shared by both references.
            "SELECT * FROM entities WHERE type = 'a' AND id IN (SELECT id FROM entities)",
            "SELECT * FROM entities a JOIN entities b ON a.id = b.id WHERE a.type = 'x'",
            "WITH entities AS (SELECT * FROM ticket) SELECT * FROM entities WHERE type = 'a'",
            // The condition is outside the SELECT that reads the table.
            "SELECT * FROM (SELECT * FROM entities) t WHERE t.type = 'a'",
            "SELECT * FROM entities GROUP BY type HAVING type = 'a'",
        ] {
            assert_eq!(pushed(sql), Vec::<Vec<Lit>>::new(), "{sql}");
        }
    }
}
