//! Which of a script's local variables only ever hold numbers, so the strip can leave their
//! `+` alone ([`Numeric`]). The `+` guard exists for strings (one `s += s` doubles a string per
//! step); a `+` of two numbers makes a number. A loop that only computes on them
//! ([`Numeric::pure_loop`]) keeps its tick, where the wall clock is read whatever the steps cap,
//! but takes it once per few thousand steps of weight rather than every turn (`strip::COUNTER`).
//!
//! A variable counts as numeric when it is declared by `let`, `const` or `var` with a plain name
//! (not in a `for … in`/`for … of` head, not a parameter, function, class or catch binding) and
//! its initializer and every assignment to it anywhere in the script (closures included) are
//! [typed](Numeric::typed) expressions: number, boolean and `null` literals, numeric variables,
//! and the operators over them (arithmetic, bitwise, comparison, logical, `!`, unary `-`/`+`/`~`,
//! `void`, `?:`, `++`/`--`, assignments to numeric variables). By induction such a variable
//! only ever holds a number, a boolean, `null` or `undefined` (never a string, an object, or a
//! BigInt, whose arithmetic allocates): calls, member reads, BigInt and string literals are not
//! typed. The set is the greatest one that holds (start from every candidate, drop those with
//! an untyped write, repeat). A script with a `with` statement or any name `eval` (a direct
//! eval writes locals the analysis cannot see) has no numeric variables.

use std::collections::HashSet;

use oxc::ast::AstKind;
use oxc::ast::ast::{
    AssignmentExpression, AssignmentTarget, BindingPattern, Expression, ForStatementInit,
    IdentifierReference, Program, SimpleAssignmentTarget, Statement, UnaryOperator,
    VariableDeclaration, VariableDeclarationKind,
};
use oxc::semantic::{ReferenceId, Scoping, SemanticBuilder, SymbolId};

/// The references to numeric variables of one stripped script.
#[derive(Default)]
pub(crate) struct Numeric {
    refs: HashSet<ReferenceId>,
    symbols: HashSet<SymbolId>,
}

impl Numeric {
    /// Finds the numeric variables of `program` (after the TypeScript is stripped).
    pub(crate) fn of(program: &Program<'_>) -> Self {
        let built = SemanticBuilder::new().with_build_nodes(true).build(program);
        let semantic = built.semantic;
        let nodes = semantic.nodes();
        let scoping = semantic.scoping();
        for node in nodes.iter() {
            match node.kind() {
                AstKind::WithStatement(_) => return Self::default(),
                AstKind::IdentifierReference(id) if id.name == "eval" => return Self::default(),
                _ => {}
            }
        }
        let mut numeric: HashSet<SymbolId> = scoping
            .symbol_ids()
            .filter(|s| declared_plainly(scoping, nodes, *s))
            .collect();
        loop {
            let is_numeric = |id: &IdentifierReference<'_>| {
                symbol_of(scoping, id).is_some_and(|s| numeric.contains(&s))
            };
            let dropped: Vec<SymbolId> = numeric
                .iter()
                .copied()
                .filter(|s| !writes_are_typed(scoping, nodes, *s, &is_numeric))
                .collect();
            if dropped.is_empty() {
                break;
            }
            for s in dropped {
                numeric.remove(&s);
            }
        }
        let refs = numeric
            .iter()
            .flat_map(|s| scoping.get_resolved_reference_ids(*s).iter().copied())
            .collect();
        Self {
            refs,
            symbols: numeric,
        }
    }

    fn is_numeric(&self, id: &IdentifierReference<'_>) -> bool {
        id.reference_id
            .get()
            .is_some_and(|r| self.refs.contains(&r))
    }

    /// Whether `e` evaluates to a number, a boolean, `null` or `undefined` without calling any
    /// code or allocating.
    pub(crate) fn typed(&self, e: &Expression<'_>) -> bool {
        typed(e, &|id| self.is_numeric(id))
    }

    /// Whether `s` is a loop that only computes on numeric variables: its head, its body and
    /// every statement in it are typed expressions, declarations of numeric variables with
    /// typed values, `if`s on typed tests, blocks, `break`, `continue`, labels and such loops.
    /// Such a loop calls no code and allocates nothing that outlives a turn (no call, no member,
    /// no string, no object, no closure), so its memory cannot grow between two checks: its
    /// tick may be taken once every few thousand steps (see `strip`'s counted tick).
    pub(crate) fn pure_loop(&self, s: &Statement<'_>) -> bool {
        let typed = |e: &Expression<'_>| self.typed(e);
        match s {
            Statement::ForStatement(f) => {
                let init = match &f.init {
                    None => true,
                    Some(ForStatementInit::VariableDeclaration(d)) => self.pure_declaration(d),
                    Some(init) => init.as_expression().is_some_and(typed),
                };
                init && f.test.as_ref().is_none_or(typed)
                    && f.update.as_ref().is_none_or(typed)
                    && self.pure(&f.body)
            }
            Statement::WhileStatement(w) => typed(&w.test) && self.pure(&w.body),
            Statement::DoWhileStatement(w) => typed(&w.test) && self.pure(&w.body),
            _ => false,
        }
    }

    /// A statement a pure loop may hold (see [`Numeric::pure_loop`]).
    fn pure(&self, s: &Statement<'_>) -> bool {
        match s {
            Statement::EmptyStatement(_)
            | Statement::BreakStatement(_)
            | Statement::ContinueStatement(_) => true,
            Statement::ExpressionStatement(e) => self.typed(&e.expression),
            Statement::VariableDeclaration(d) => self.pure_declaration(d),
            Statement::BlockStatement(b) => b.body.iter().all(|s| self.pure(s)),
            Statement::IfStatement(i) => {
                self.typed(&i.test)
                    && self.pure(&i.consequent)
                    && i.alternate.as_ref().is_none_or(|s| self.pure(s))
            }
            Statement::LabeledStatement(l) => self.pure(&l.body),
            _ => self.pure_loop(s),
        }
    }

    /// `let`/`const`/`var` of numeric variables only, each with a typed value or none.
    fn pure_declaration(&self, d: &VariableDeclaration<'_>) -> bool {
        matches!(
            d.kind,
            VariableDeclarationKind::Let
                | VariableDeclarationKind::Const
                | VariableDeclarationKind::Var
        ) && d.declarations.iter().all(|v| {
            let BindingPattern::BindingIdentifier(b) = &v.id else {
                return false;
            };
            b.symbol_id.get().is_some_and(|s| self.symbols.contains(&s))
                && v.init.as_ref().is_none_or(|e| self.typed(e))
        })
    }

    /// Whether `a` assigns a typed value to a numeric variable (`n += 1`).
    pub(crate) fn assigns_typed(&self, a: &AssignmentExpression<'_>) -> bool {
        assigns_typed(a, &|id| self.is_numeric(id))
    }
}

fn symbol_of(scoping: &Scoping, id: &IdentifierReference<'_>) -> Option<SymbolId> {
    scoping.get_reference(id.reference_id.get()?).symbol_id()
}

/// Declared only by `let`/`const`/`var` declarators with a plain name outside a `for … in/of`
/// head, each initializer (if any) checked later with the writes.
fn declared_plainly(scoping: &Scoping, nodes: &oxc::semantic::AstNodes<'_>, s: SymbolId) -> bool {
    scoping.symbol_declarations(s).all(|node| {
        let AstKind::VariableDeclarator(v) = nodes.kind(node) else {
            return false;
        };
        if !matches!(v.id, BindingPattern::BindingIdentifier(_)) {
            return false;
        }
        let declaration = nodes.parent_id(node);
        !matches!(
            nodes.parent_kind(declaration),
            AstKind::ForInStatement(_) | AstKind::ForOfStatement(_)
        )
    })
}

/// Whether every initializer of `s` and every write to it is typed, given `is_numeric`.
fn writes_are_typed(
    scoping: &Scoping,
    nodes: &oxc::semantic::AstNodes<'_>,
    s: SymbolId,
    is_numeric: &dyn Fn(&IdentifierReference<'_>) -> bool,
) -> bool {
    let inits = scoping
        .symbol_declarations(s)
        .all(|node| match nodes.kind(node) {
            AstKind::VariableDeclarator(v) => v.init.as_ref().is_none_or(|i| typed(i, is_numeric)),
            _ => false,
        });
    inits
        && scoping.get_resolved_reference_ids(s).iter().all(|&id| {
            let r = scoping.get_reference(id);
            if !r.flags().is_write() {
                return true;
            }
            match nodes.parent_kind(r.node_id()) {
                AstKind::AssignmentExpression(a) => {
                    matches!(&a.left, AssignmentTarget::AssignmentTargetIdentifier(target)
                        if target.reference_id.get() == Some(id))
                        && typed(&a.right, is_numeric)
                }
                AstKind::UpdateExpression(_) => true,
                _ => false,
            }
        })
}

/// See [`Numeric::typed`].
fn typed(e: &Expression<'_>, is_numeric: &dyn Fn(&IdentifierReference<'_>) -> bool) -> bool {
    let t = |e: &Expression<'_>| typed(e, is_numeric);
    match e {
        Expression::NumericLiteral(_)
        | Expression::BooleanLiteral(_)
        | Expression::NullLiteral(_) => true,
        Expression::Identifier(id) => is_numeric(id),
        Expression::ParenthesizedExpression(p) => t(&p.expression),
        Expression::UnaryExpression(u) => {
            matches!(
                u.operator,
                UnaryOperator::UnaryPlus
                    | UnaryOperator::UnaryNegation
                    | UnaryOperator::LogicalNot
                    | UnaryOperator::BitwiseNot
                    | UnaryOperator::Void
            ) && t(&u.argument)
        }
        Expression::BinaryExpression(b) => !b.operator.is_relational() && t(&b.left) && t(&b.right),
        Expression::LogicalExpression(l) => t(&l.left) && t(&l.right),
        Expression::ConditionalExpression(c) => t(&c.test) && t(&c.consequent) && t(&c.alternate),
        Expression::SequenceExpression(s) => s.expressions.iter().all(t),
        Expression::UpdateExpression(u) => matches!(
            &u.argument,
            SimpleAssignmentTarget::AssignmentTargetIdentifier(id) if is_numeric(id)
        ),
        Expression::AssignmentExpression(a) => assigns_typed(a, is_numeric),
        _ => false,
    }
}

/// See [`Numeric::assigns_typed`].
fn assigns_typed(
    a: &AssignmentExpression<'_>,
    is_numeric: &dyn Fn(&IdentifierReference<'_>) -> bool,
) -> bool {
    matches!(&a.left, AssignmentTarget::AssignmentTargetIdentifier(id) if is_numeric(id))
        && typed(&a.right, is_numeric)
}

#[cfg(test)]
mod tests {
    use crate::caps::ScriptCaps;
    use crate::strip::{ADD_GUARD, COUNTER, TICK, strip};

    /// The stripped script's `+` guards and ticks (the function body's own tick is one).
    fn guards(source: &str) -> (usize, usize) {
        let js = strip(source, &ScriptCaps::default()).unwrap().js;
        let count = |name: &str| js.matches(&format!("{name}(")).count();
        (count(ADD_GUARD), count(TICK))
    }

    #[test]
    fn arithmetic_on_numeric_variables_has_no_guard_and_its_loop_keeps_its_tick() {
        for numeric in [
            "let s = 0; for (let i = 0; i < 10; i++) { s += i; } return s;",
            "let s = 0, i = 0; while (i < 10) { s = s + i * 2 - 1; i += 1; } return s;",
            "let x = 1; let i = 0; do { x = (x * 31 + i) | 0; if (x > 5) { continue; } else x = -x; i++; } while (i < 9); return x;",
            "let a = 0, b = 0; for (;;) { a = b; b = a + 1; if (b > 9) break; } return a;",
            "var n; for (let i = 0; i < 3; i++) { const t = i + 1; n = t + (n ?? 0); } return n;",
        ] {
            // The function body's tick and the loop's: the wall clock is read there.
            assert_eq!(guards(numeric), (0, 2), "{numeric}");
        }
    }

    /// How many loops of the stripped script take a counted tick.
    fn counted(source: &str) -> usize {
        let js = strip(source, &ScriptCaps::default()).unwrap().js;
        js.matches(&format!("{COUNTER} -=")).count()
    }

    #[test]
    fn loops_of_numeric_arithmetic_take_a_counted_tick_and_others_a_tick_every_turn() {
        for (source, pure) in [
            (
                "let s = 0; for (let i = 0; i < 9; i++) { s += i; } return s;",
                1,
            ),
            ("let i = 0; while (i < 9) i++; return i;", 1),
            ("for (;;) {} return 1;", 1),
            (
                "let x = 0; do { x = (x * 31 + 7) | 0; if (x > 5) continue; else { x = -x; } } while (x < 9); return x;",
                1,
            ),
            // Nested, labelled, declarations inside: both loops.
            (
                "let t = 0; a: for (let i = 0; i < 3; i++) { for (let j = 0; j < 3; j++) { const k = i * j; if (k > 2) continue a; t += k; } } return t;",
                2,
            ),
            // An outer loop with a call keeps its tick every turn; its inner numeric loop counts.
            (
                "let t = 0; for (let i = 0; i < 3; i++) { ctx.log('x'); for (let j = 0; j < 3; j++) t += j; } return t;",
                1,
            ),
            // A call, a member, a string, an object, a closure, a parameter, a for-of: every turn.
            (
                "let t = 0; for (let i = 0; i < 3; i++) { t = t + Math.abs(i); } return t;",
                0,
            ),
            (
                "const a = [1]; let t = 0; for (let i = 0; i < 1; i++) { t = a[0]; } return t;",
                0,
            ),
            (
                "let s = ''; for (let i = 0; i < 3; i++) { s += 'a'; } return s;",
                0,
            ),
            (
                "let t = 0; for (let i = 0; i < 3; i++) { const o = {}; } return t;",
                0,
            ),
            (
                "let t = 0; for (let i = 0; i < 3; i++) { const f = () => 1; } return t;",
                0,
            ),
            (
                "const f = (n) => { let t = 0; for (let i = 0; i < n; i++) t += i; return t; }; return f(3);",
                0,
            ),
            (
                "let t = 0; for (const x of [1, 2]) { t = t + 1; } return t;",
                0,
            ),
            (
                "let t = 0; while (t < 3) { try { t++; } catch {} } return t;",
                0,
            ),
        ] {
            assert_eq!(counted(source), pure, "{source}");
        }
    }

    #[test]
    fn anything_that_could_hold_a_string_an_object_or_a_bigint_keeps_its_guards() {
        for (source, adds, ticks) in [
            // A later assignment of a string.
            (
                "let s = 0; s = 'a'; for (let i = 0; i < 3; i++) { s += i; } return s;",
                1,
                2,
            ),
            // A closure's assignment counts as well.
            (
                "let n = 0; const f = () => { n = 'x'; }; f(); return n + 1;",
                1,
                2,
            ),
            // Loop variables of for-of and for-in, parameters, calls, members, typeof.
            (
                "let t = 0; for (const x of [1]) { t += x; } return t;",
                1,
                2,
            ),
            (
                "let t = 0; for (var k in {a: 1}) { t = t + k; } return t;",
                1,
                2,
            ),
            ("const f = (a) => a + 1; return f(1);", 1, 2),
            ("let s = 0; s = s + Math.max(1, 2); return s;", 1, 1),
            ("const o = {x: 1}; return o.x + 1;", 1, 1),
            ("let t = typeof 1; return t + t;", 1, 1),
            // BigInts are not numbers here (their arithmetic allocates).
            ("let b = 1n; let c = 0; c = b; return c + 1;", 1, 1),
            // Destructuring writes are not followed.
            ("let a = 0; [a] = ['x']; return a + 1;", 1, 1),
            // A direct eval or a with statement ends the analysis for the whole script.
            ("let n = 0; eval('n = 1'); return n + 1;", 1, 1),
            // A numeric variable assigned from one that is not.
            ("let a = 0, b = 'x'; a = b; return a + 1;", 1, 1),
        ] {
            assert_eq!(guards(source), (adds, ticks), "{source}");
        }
    }
}
