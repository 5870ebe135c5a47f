//! The most bytes each value of a query can take, worked out from its syntax before anything
//! runs. SQL functions can build values far larger than what they read (`REPEAT`, `LPAD`,
//! `REPLACE`, and any of them nested in another), and the engine allocates a value whole, so the
//! bound has to hold before the allocation: a query whose values could outgrow it is refused,
//! naming the limit.
//!
//! A value's bound is `data × D + bytes`: `data` copies of what the query reads (a column or
//! a parameter, each at most the largest value stored, `D`) and `bytes` of text the query makes
//! up itself (literals, padding). Every expression must stay within [`MAX_DATA_COPIES`] copies
//! and [`MAX_MADE_BYTES`] made-up bytes, and so must the sum of one `SELECT`'s outputs.
//!
//! The bound holds for every value, wherever it comes from ([`check_query`]):
//! - a name may stand for a stored column or for an output of the query's own common table
//!   expressions, derived tables and subqueries (which are computed values), so every name is
//!   bounded by the widest of all of those, found by going round them until nothing widens
//!   (a chain of `WITH` tables each doubling a value is bounded as a whole, not link by link);
//! - every kind of expression has its own rule in an exhaustive `match` (a new kind from a
//!   parser upgrade does not compile until it has one), and a function is bounded only if it
//!   is one of the engine's functions whose result is known (`function`): any other is
//!   refused rather than assumed small.
//!
//! What a query holds across rows (sorts, groups, the tables of its `WITH`) is bounded while it
//! runs, as a whole (`store::Guard`, by the memory meter).

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query, Select,
    SelectItem, SetExpr, TableFactor, Value as Literal, Visit, Visitor,
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
    /// One stored value.
    pub const DATA: Bound = Bound { data: 1, bytes: 0 };

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

/// Checks every value `query` can build: each expression, and the sum of each `SELECT`'s
/// outputs, with every name bounded by the widest value it could stand for.
pub fn check_query(query: &Query) -> Result<()> {
    query_bound(query, Bound::DATA).map(|_| ())
}

/// Checks `query`, whose names may stand for values up to `outer` (stored columns, and what
/// the names of an enclosing query stand for: a correlated subquery sees them); returns the
/// widest of its outputs. Its `WITH` tables widen the names of those after them and of its
/// body; its `ORDER BY` may also name its own outputs.
fn query_bound(query: &Query, outer: Bound) -> Result<Bound> {
    let mut names = outer;
    if let Some(with) = &query.with {
        for cte in &with.cte_tables {
            names = names.max(query_bound(&cte.query, names)?);
        }
    }
    let out = set_bound(&query.body, names)?;
    let ordered = names.max(out);
    for e in query.order_by.iter().flat_map(|o| &o.exprs) {
        check(&e.expr, ordered)?;
    }
    for e in query
        .limit
        .iter()
        .chain(query.offset.as_ref().map(|o| &o.value))
    {
        check(e, names)?;
    }
    Ok(out)
}

fn set_bound(body: &SetExpr, names: Bound) -> Result<Bound> {
    match body {
        SetExpr::Select(select) => select_bound(select, names),
        SetExpr::Query(q) => query_bound(q, names),
        SetExpr::SetOperation { left, right, .. } => {
            Ok(set_bound(left, names)?.max(set_bound(right, names)?))
        }
        SetExpr::Values(values) => {
            let mut widest = Bound::default();
            for row in &values.rows {
                let mut sum = Bound::default();
                for e in row {
                    sum = sum.plus(check(e, names)?);
                }
                widest = widest.max(sum);
            }
            Ok(widest)
        }
        // Writes are refused before this (`statement::refuse_writes`).
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Table(_) => Ok(names),
    }
}

/// The names of a `SELECT` stand for stored columns, what its tables in `FROM` (derived
/// tables among them) output, and what `outer` covers; every expression of it is checked with
/// them, and the sum of its outputs.
fn select_bound(select: &Select, outer: Bound) -> Result<Bound> {
    let mut names = outer;
    for from in &select.from {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            names = names.max(factor_bound(factor, outer)?);
        }
    }
    let mut roots = Roots {
        name: names,
        queries: 0,
        exprs: 0,
        failed: None,
    };
    let _ = select.visit(&mut roots);
    if let Some(e) = roots.failed {
        return Err(e);
    }
    check_row(&select.projection, names)?;
    let mut widest = Bound::default();
    for item in &select.projection {
        widest = widest.max(item_bound(item, names)?);
    }
    Ok(widest)
}

/// What a table of a `FROM` outputs: stored columns, or a derived table's outputs.
fn factor_bound(factor: &TableFactor, outer: Bound) -> Result<Bound> {
    match factor {
        TableFactor::Table { .. } => Ok(Bound::DATA),
        TableFactor::Derived { subquery, .. } => query_bound(subquery, outer),
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => {
            let mut widest = factor_bound(&table_with_joins.relation, outer)?;
            for join in &table_with_joins.joins {
                widest = widest.max(factor_bound(&join.relation, outer)?);
            }
            Ok(widest)
        }
        other => Err(refuse(&format!("{other} is not a table lore can bound"))),
    }
}

/// Checks each expression of a `SELECT` that is not part of another (each is checked whole,
/// nodes and all), leaving the queries nested in it to [`query_bound`], which reaches them
/// through the expressions and tables that hold them.
struct Roots {
    name: Bound,
    queries: usize,
    exprs: usize,
    failed: Option<LoreError>,
}

impl Visitor for Roots {
    type Break = ();
    fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.queries += 1;
        ControlFlow::Continue(())
    }
    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.queries -= 1;
        ControlFlow::Continue(())
    }
    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        self.exprs += 1;
        if self.queries == 0
            && self.exprs == 1
            && let Err(e) = check(expr, self.name)
        {
            self.failed = Some(e);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
    fn post_visit_expr(&mut self, _expr: &Expr) -> ControlFlow<()> {
        self.exprs -= 1;
        ControlFlow::Continue(())
    }
}

/// Checks one expression (every node in it), its names bounded by `name`, and returns its
/// bound.
pub fn check(expr: &Expr, name: Bound) -> Result<Bound> {
    let b = bound(expr, name)?;
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

fn item_bound(item: &SelectItem, name: Bound) -> Result<Bound> {
    match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => check(e, name),
        // Columns as they are: stored, or outputs of what the query names.
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => Ok(name),
    }
}

/// Checks the sum of a `SELECT`'s outputs.
pub fn check_row(items: &[SelectItem], name: Bound) -> Result<()> {
    let mut row = Bound::default();
    for item in items {
        row = row.plus(item_bound(item, name)?);
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

/// The sum of `exprs`' bounds.
fn sum<'a>(exprs: impl IntoIterator<Item = &'a Expr>, name: Bound) -> Result<Bound> {
    let mut out = Bound::default();
    for e in exprs {
        out = out.plus(check(e, name)?);
    }
    Ok(out)
}

/// `exprs` checked; a scalar (a test, a number, a date).
fn scalar<'a>(exprs: impl IntoIterator<Item = &'a Expr>, name: Bound) -> Result<Bound> {
    for e in exprs {
        check(e, name)?;
    }
    Ok(Bound::SCALAR)
}

/// The bound of `expr`'s value, its names bounded by `name`. One arm per kind of expression,
/// with no catch-all: what a kind can build is decided here for each.
fn bound(expr: &Expr, name: Bound) -> Result<Bound> {
    use std::iter::once;
    Ok(match expr {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => name,
        Expr::Wildcard | Expr::QualifiedWildcard(_) => name,
        Expr::Value(v) => literal_bound(v),
        Expr::IntroducedString { value, .. } => literal_bound(value),
        Expr::TypedString { value, .. } => Bound {
            data: 0,
            bytes: value.len() as u64,
        },
        // A value as it is, or a part of it.
        Expr::Nested(e)
        | Expr::Collate { expr: e, .. }
        | Expr::Named { expr: e, .. }
        | Expr::OuterJoin(e)
        | Expr::Prior(e)
        | Expr::JsonAccess { value: e, .. }
        | Expr::CompositeAccess { expr: e, .. }
        | Expr::MapAccess { column: e, .. } => check(e, name)?,
        Expr::Subscript { expr, subscript } => {
            let _ = sum(subscript_exprs(subscript), name)?;
            check(expr, name)?
        }
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            scalar(
                substring_from.iter().chain(substring_for).map(|b| &**b),
                name,
            )?;
            check(expr, name)?
        }
        Expr::Trim {
            expr,
            trim_what,
            trim_characters,
            ..
        } => {
            scalar(trim_what.iter().map(|b| &**b), name)?;
            scalar(trim_characters.iter().flatten(), name)?;
            check(expr, name)?
        }
        // A value written as another type: a stored value's text, or a number's.
        Expr::Cast { expr, .. } => check(expr, name)?.plus(Bound::SCALAR),
        Expr::Convert { expr, styles, .. } => {
            scalar(styles, name)?;
            check(expr, name)?.plus(Bound::SCALAR)
        }
        Expr::Overlay {
            expr,
            overlay_what,
            overlay_from,
            overlay_for,
        } => {
            scalar(once(&**overlay_from).chain(overlay_for.as_deref()), name)?;
            sum([&**expr, &**overlay_what], name)?
        }
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
            let (l, r) = (check(left, name)?, check(right, name)?);
            match op {
                // Arithmetic, comparison, logic: a scalar.
                BinaryOperator::Plus
                | BinaryOperator::Minus
                | BinaryOperator::Multiply
                | BinaryOperator::Divide
                | BinaryOperator::Modulo
                | BinaryOperator::Gt
                | BinaryOperator::Lt
                | BinaryOperator::GtEq
                | BinaryOperator::LtEq
                | BinaryOperator::Spaceship
                | BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::And
                | BinaryOperator::Or
                | BinaryOperator::Xor
                | BinaryOperator::PGRegexMatch
                | BinaryOperator::PGRegexIMatch
                | BinaryOperator::PGRegexNotMatch
                | BinaryOperator::PGRegexNotIMatch => Bound::SCALAR,
                // `||`, and any operator not known to make a scalar: what both sides hold.
                _ => l.plus(r),
            }
        }
        Expr::UnaryOp { expr, .. } => check(expr, name)?.max(Bound::SCALAR),
        Expr::Case {
            operand,
            conditions,
            results,
            else_result,
        } => {
            scalar(operand.as_deref().into_iter().chain(conditions), name)?;
            let mut out = Bound::default();
            for r in results.iter().chain(else_result.as_deref()) {
                out = out.max(check(r, name)?);
            }
            out
        }
        // Lists and records: what their parts hold together.
        Expr::Tuple(items) | Expr::Array(sqlparser::ast::Array { elem: items, .. }) => {
            sum(items, name)?
        }
        Expr::Struct { values, .. } => sum(values, name)?,
        Expr::Dictionary(fields) => sum(fields.iter().map(|f| &*f.value), name)?,
        Expr::Map(map) => sum(map.entries.iter().flat_map(|e| [&*e.key, &*e.value]), name)?,
        Expr::GroupingSets(sets) | Expr::Cube(sets) | Expr::Rollup(sets) => {
            sum(sets.iter().flatten(), name)?
        }
        // Tests and numbers.
        Expr::IsFalse(e)
        | Expr::IsNotFalse(e)
        | Expr::IsTrue(e)
        | Expr::IsNotTrue(e)
        | Expr::IsNull(e)
        | Expr::IsNotNull(e)
        | Expr::IsUnknown(e)
        | Expr::IsNotUnknown(e)
        | Expr::Ceil { expr: e, .. }
        | Expr::Floor { expr: e, .. }
        | Expr::Extract { expr: e, .. } => scalar([&**e], name)?,
        Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => scalar([&**a, &**b], name)?,
        Expr::InList { expr, list, .. } => scalar(once(&**expr).chain(list), name)?,
        Expr::InUnnest {
            expr, array_expr, ..
        } => scalar([&**expr, &**array_expr], name)?,
        Expr::Between {
            expr, low, high, ..
        } => scalar([&**expr, &**low, &**high], name)?,
        Expr::Like { expr, pattern, .. }
        | Expr::ILike { expr, pattern, .. }
        | Expr::SimilarTo { expr, pattern, .. }
        | Expr::RLike { expr, pattern, .. } => scalar([&**expr, &**pattern], name)?,
        Expr::AnyOp { left, right, .. } | Expr::AllOp { left, right, .. } => {
            scalar([&**left, &**right], name)?
        }
        Expr::Position { expr, r#in } => scalar([&**expr, &**r#in], name)?,
        Expr::AtTimeZone {
            timestamp,
            time_zone,
        } => scalar([&**timestamp, &**time_zone], name)?,
        Expr::Interval(interval) => scalar([&*interval.value], name)?,
        Expr::MatchAgainst { .. } => Bound::SCALAR,
        // A subquery's value is one of its outputs; it sees this query's names. `EXISTS` and
        // `IN (SELECT …)` are tests.
        Expr::Subquery(q) => query_bound(q, name)?,
        Expr::Exists { subquery, .. } => {
            query_bound(subquery, name)?;
            Bound::SCALAR
        }
        Expr::InSubquery { expr, subquery, .. } => {
            query_bound(subquery, name)?;
            scalar([&**expr], name)?
        }
        Expr::Function(f) => {
            let args = args_of(&f.args);
            let bounds = args
                .iter()
                .map(|a| check(a, name))
                .collect::<Result<Vec<_>>>()?;
            let bounds = match &f.args {
                FunctionArguments::Subquery(q) => vec![query_bound(q, name)?],
                _ => bounds,
            };
            function(&f.name.to_string().to_ascii_uppercase(), &args, bounds)?
        }
        Expr::Lambda(_) => return Err(refuse("a lambda function is not supported")),
    })
}

/// The expressions a subscript holds (`a[1]`, `a[1:2:1]`).
fn subscript_exprs(subscript: &sqlparser::ast::Subscript) -> Vec<&Expr> {
    match subscript {
        sqlparser::ast::Subscript::Index { index } => vec![index],
        sqlparser::ast::Subscript::Slice {
            lower_bound,
            upper_bound,
            stride,
        } => lower_bound
            .iter()
            .chain(upper_bound)
            .chain(stride)
            .collect(),
    }
}

fn literal_bound(v: &Literal) -> Bound {
    match v {
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
    }
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

/// What the engine's function `name` can build from `args` (whose bounds are `bounds`). The
/// table is closed: a function lore does not know the result of is refused, not assumed small.
fn function(name: &str, args: &[&Expr], bounds: Vec<Bound>) -> Result<Bound> {
    let arg = |i: usize| bounds.get(i).copied().unwrap_or_default();
    let sum = bounds.iter().fold(Bound::default(), |a, b| a.plus(*b));
    let widest = bounds.iter().fold(Bound::default(), |a, b| a.max(*b));
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
        // The separator goes between every pair of the others.
        "CONCAT_WS" if bounds.len() > 2 => sum.plus(arg(0).times(bounds.len() as u64 - 2)),
        "CONCAT" | "CONCAT_WS" | "APPEND" | "PREPEND" | "SPLICE" => sum,
        // Case mapping can turn one character into three (ß → SS, ŉ → ʼN in more bytes).
        "UPPER" | "LOWER" | "INITCAP" => arg(0).times(3),
        "HEX" => arg(0).times(2),
        // A map's entries as pairs: its keys and values again, with a list around each.
        "ENTRIES" => arg(0).times(2).plus(Bound::SCALAR),
        // Date and number formatting: a short pattern can expand (`%A` is a weekday name).
        "FORMAT" => sum.times(8),
        // One of their arguments, or a part of one.
        "MIN" | "MAX" | "COALESCE" | "IFNULL" | "NULLIF" | "GREATEST" | "LEFT" | "RIGHT"
        | "LTRIM" | "RTRIM" | "REVERSE" | "SUBSTR" | "UNWRAP" | "SKIP" | "TAKE" | "SLICE"
        | "SORT" | "KEYS" | "VALUES" | "DEDUP" => widest.max(Bound::SCALAR),
        // Numbers, dates, tests, identifiers of a fixed size.
        "COUNT" | "SUM" | "AVG" | "VARIANCE" | "STDEV" | "FIND_IDX" | "SQRT" | "POWER" | "RAND"
        | "ROUND" | "TRUNC" | "EXP" | "LN" | "LOG" | "LOG2" | "LOG10" | "SIN" | "COS" | "TAN"
        | "ASIN" | "ACOS" | "ATAN" | "RADIANS" | "DEGREES" | "PI" | "NOW" | "CURRENT_DATE"
        | "CURRENT_TIME" | "CURRENT_TIMESTAMP" | "GCD" | "LAST_DAY" | "LCM" | "DIV" | "MOD"
        | "ABS" | "SIGN" | "GENERATE_UUID" | "TO_DATE" | "TO_TIMESTAMP" | "TO_TIME"
        | "ADD_MONTH" | "ASCII" | "CHR" | "MD5" | "LENGTH" | "POINT" | "GET_X" | "GET_Y"
        | "CALC_DISTANCE" | "IS_EMPTY" => Bound::SCALAR,
        other => {
            return Err(refuse(&format!(
                "{other}(…) is not a function lore knows the size of the result of"
            )));
        }
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
            assert!(check(&expr(sql), Bound::DATA).is_ok(), "{sql}");
        }
    }

    #[test]
    fn regex_patterns_are_short_literals() {
        assert!(check(&expr("name ~ '^a.*b$'"), Bound::DATA).is_ok());
        assert!(check(&expr("name !~* 'x'"), Bound::DATA).is_ok());
        for sql in ["name ~ other", "name ~ $1", "name ~* REPEAT('a', 10)"] {
            let e = check(&expr(sql), Bound::DATA).expect_err(sql).to_string();
            assert!(e.contains("string written in the query"), "{sql}: {e}");
        }
        let long = format!("name ~ '{}'", "a".repeat(300));
        assert!(
            check(&expr(&long), Bound::DATA)
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
            let e = check(&expr(sql), Bound::DATA).expect_err(sql);
            assert!(e.to_string().contains("copies of the data"), "{sql}: {e}");
        }
    }

    fn query(sql: &str) -> Result<()> {
        let statement = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        let sqlparser::ast::Statement::Query(q) = statement else {
            panic!("{sql}")
        };
        check_query(&q)
    }

    #[test]
    fn a_value_built_through_the_querys_own_tables_is_bounded_as_a_whole() {
        for sql in [
            // The probe's shape: a chain of WITH tables, each multiplying a column.
            "WITH a AS (SELECT REPEAT(name, 16) AS s FROM entities), b AS (SELECT REPEAT(s, 16) AS s FROM a) SELECT s FROM b",
            "WITH a AS (SELECT name || name AS s FROM entities), b AS (SELECT s || s AS s FROM a), c AS (SELECT s || s AS s FROM b), d AS (SELECT s || s AS s FROM c), e AS (SELECT s || s AS s FROM d) SELECT s FROM e",
            // Renamed columns, a column list, a star: the name does not hide where it came from.
            "WITH a(x) AS (SELECT REPEAT(name, 16) FROM entities) SELECT REPEAT(x, 16) FROM a",
            "WITH a AS (SELECT REPEAT(name, 16) AS s FROM entities), b AS (SELECT * FROM a) SELECT REPEAT(b.s, 2) FROM b",
            // Shapes of the same class without WITH: derived tables and scalar subqueries.
            "SELECT REPEAT(d.s, 16) FROM (SELECT REPEAT(name, 16) AS s FROM entities) d",
            "SELECT REPEAT((SELECT REPEAT(name, 16) FROM entities LIMIT 1), 16) FROM entities",
            "SELECT UPPER(UPPER(s)) FROM (SELECT UPPER(UPPER(name)) AS s FROM entities) d",
            // A correlated subquery sees the derived table of the query around it.
            "SELECT (SELECT REPEAT(d.s, 16) FROM entities LIMIT 1) FROM (SELECT REPEAT(name, 16) AS s FROM entities) d",
            // The outermost ORDER BY names an output.
            "SELECT REPEAT(name, 16) AS r FROM entities ORDER BY REPEAT(r, 16)",
        ] {
            let e = query(sql).expect_err(sql).to_string();
            assert!(e.contains("copies of the data"), "{sql}: {e}");
        }
        for sql in [
            "WITH a AS (SELECT name FROM entities) SELECT REPEAT(name, 8) FROM a",
            "SELECT d.n FROM (SELECT name AS n FROM entities) d ORDER BY d.n",
            "SELECT REPEAT(name, 4), REPEAT(kind, 4) FROM entities",
            "SELECT COUNT(*) FROM (SELECT UPPER(name) AS u FROM entities) d GROUP BY u",
        ] {
            assert!(query(sql).is_ok(), "{sql}: {:?}", query(sql));
        }
    }

    #[test]
    fn a_function_whose_result_lore_cannot_bound_is_refused() {
        for sql in [
            "SELECT STRING_AGG(name, ',') FROM entities",
            "SELECT GENERATE_SERIES(1, 100000000) FROM entities",
            "SELECT MY_UDF(name) FROM entities",
        ] {
            let e = query(sql).expect_err(sql).to_string();
            assert!(e.contains("not a function lore knows"), "{sql}: {e}");
        }
    }
}
