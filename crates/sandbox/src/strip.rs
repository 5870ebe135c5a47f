//! TypeScript to JavaScript: a real TypeScript parser (`oxc`) strips the types, and a source
//! map turns positions in the JavaScript back into the script's own line and column.
//!
//! A script is either the body of an async function (`ctx`, `client` and `$` in scope), or a
//! module whose default export is the function (`export default async (ctx, client) => ...`).
//! The body form is wrapped in a function expression before parsing, on a line of its own, so
//! its positions shift by exactly one line.

use std::path::Path;

use oxc::allocator::{Allocator, TakeIn};
use oxc::ast::ast::{
    Argument, AssignmentOperator, AssignmentTarget, BinaryOperator, Expression, Statement,
};
use oxc::ast::builder::AstBuilder;
use oxc::ast_visit::{VisitMut, walk_mut};
use oxc::codegen::{Codegen, CodegenOptions};
use oxc::parser::Parser;
use oxc::semantic::SemanticBuilder;
use oxc::span::SourceType;
use oxc::transformer::{TransformOptions, Transformer};

use crate::caps::{Cap, ScriptCaps};
use crate::numeric::Numeric;

/// The two script forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The body of `async (ctx, client, $) => { ... }`: evaluates to that function.
    Body,
    /// A module whose default export is the function: evaluates to a function that runs the
    /// module's top level and returns the export. Imports and other exports are refused.
    Module,
}

/// A script ready for the engine.
#[derive(Debug)]
pub struct Stripped {
    pub js: String,
    pub form: Form,
    /// Per generated line, `(generated column, source line, source column)` points, sorted.
    map: Vec<Vec<(u32, u32, u32)>>,
}

/// Where a script failed, in its own (TypeScript) coordinates, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// A script that could not be turned into JavaScript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StripError {
    Cap(Cap),
    Syntax {
        message: String,
        position: Option<Position>,
    },
}

/// The host function every `+` of a script becomes: it adds, then checks the length of a
/// string result against the string cap. One `s += s` doubles a string per interpreter step,
/// far faster than any step budget, and the engine has no limit of its own.
pub const ADD_GUARD: &str = "__lore_add";
/// The same for template literals with substitutions.
pub const STRING_GUARD: &str = "__lore_str";
/// The host function at the top of every loop body and function body: it checks the memory
/// cap, which nothing inside the engine does (see `sandbox::meter`).
pub const TICK: &str = "__lore_tick";
/// What a regular expression literal becomes: `/a+/g` is `__lore_regexp("a+", "g")`, a
/// RegExp that lore's matcher runs (see `sandbox::regexp`).
pub const REGEXP: &str = "__lore_regexp";
/// The counter a pure loop (`numeric::Numeric::pure_loop`) spends its weight from before it
/// takes a tick: `if ((__lore_n -= W) < 0) __lore_n = __lore_tick();`, where `W` is the loop's
/// length in the source (at least its number of engine steps per turn) and the tick answers
/// [`PURE_LOOP_BUDGET`]. Each function body holding such a loop declares its own (a local the
/// engine reaches without walking the scope chain); the wrapper's is the fallback.
pub const COUNTER: &str = "__lore_n";
const COUNTER_DECLARATION: &str = "let __lore_n = 0;";
/// How much loop weight goes by between two ticks of pure loops: a few thousand engine steps,
/// of the order of the clock's own period ([`crate::host::CLOCK_EVERY_STEPS`]).
pub const PURE_LOOP_BUDGET: u32 = 8_192;
/// Scripts may not name the guards (a local `__lore_add` would shadow the global one).
const RESERVED_PREFIX: &str = "__lore_";
/// The guards the script's code reaches as parameters of a function around it, in this order
/// (`event_loop::start` passes them): a local binding, found by the compiler, where a global
/// one is a lookup by name on every `+` and every loop turn. No script can name them.
pub const GUARD_PARAMS: [&str; 4] = [ADD_GUARD, STRING_GUARD, TICK, REGEXP];
const GUARDS_PREFIX: &str =
    "(function (__lore_add, __lore_str, __lore_tick, __lore_regexp) { let __lore_n = 0; return ";
const GUARDS_SUFFIX: &str = " })";

/// Rewrites `a + b` to `__lore_add(a, b)`, `x += v` to `x = __lore_add(x, v)` for plain names
/// and members of plain names, `` `..${x}..` `` to `__lore_str(`..${x}..`)`, and `/re/f` to
/// `__lore_regexp("re", "f")`; and begins
/// every loop body and function body with `__lore_tick()` (a concise arrow body `e` becomes
/// `(__lore_tick(), e)`).
struct GuardConcatenation<'a> {
    ast: AstBuilder<'a>,
    alloc: &'a Allocator,
    /// The numeric variables: their `+` needs no guard.
    numeric: Numeric,
    /// Per function body being rewritten, whether a pure loop in it (not in a nested function)
    /// spends from the [`COUNTER`]: the body then declares its own, a local binding the engine
    /// reaches without a lookup through the scope chain (the wrapper's is the fallback).
    counters: Vec<bool>,
}

impl<'a> GuardConcatenation<'a> {
    fn guard(
        &self,
        name: &'static str,
        span: oxc::span::Span,
        args: Vec<Expression<'a>>,
    ) -> Expression<'a> {
        let callee = Expression::new_identifier(span, name, &self.ast);
        let args: Vec<Argument<'a>> = args.into_iter().map(Argument::from).collect();
        let args = oxc::allocator::Vec::from_iter_in(args, &self.ast);
        Expression::new_call_expression(span, callee, None, args, false, &self.ast)
    }

    fn tick(&self, span: oxc::span::Span) -> Expression<'a> {
        self.guard(TICK, span, Vec::new())
    }

    fn tick_statement(&self, span: oxc::span::Span) -> Statement<'a> {
        Statement::new_expression_statement(span, self.tick(span), &self.ast)
    }

    /// Puts `first` at the top of a loop's body, making the body a block if it is not one.
    fn put_first(&self, body: &mut Statement<'a>, first: Statement<'a>) {
        use oxc::span::GetSpan;
        if let Statement::BlockStatement(block) = body {
            block.body.insert(0, first);
            return;
        }
        let span = body.span();
        let inner = body.take_in(&self.ast);
        let statements = oxc::allocator::Vec::from_iter_in([first, inner], &self.ast);
        *body = Statement::new_block_statement(span, statements, &self.ast);
    }

    /// Puts a counted tick first in a pure loop's body (see [`COUNTER`]): `weight` is the
    /// loop's length in the source (more than zero: [`Self::pure_weight`]).
    fn count_loop_body(&self, body: &mut Statement<'a>, weight: u32) {
        use oxc::ast::ast::NumberBase;
        use oxc::span::GetSpan;
        let span = body.span();
        let counter =
            || AssignmentTarget::new_assignment_target_identifier(span, COUNTER, &self.ast);
        let weight = Expression::new_numeric_literal(
            span,
            weight.into(),
            None,
            NumberBase::Decimal,
            &self.ast,
        );
        let spent = Expression::new_assignment_expression(
            span,
            AssignmentOperator::Subtraction,
            counter(),
            weight,
            &self.ast,
        );
        let zero = Expression::new_numeric_literal(span, 0.0, None, NumberBase::Decimal, &self.ast);
        let test = Expression::new_binary_expression(
            span,
            spent,
            BinaryOperator::LessThan,
            zero,
            &self.ast,
        );
        let refill = Expression::new_assignment_expression(
            span,
            AssignmentOperator::Assign,
            counter(),
            self.tick(span),
            &self.ast,
        );
        let refill = Statement::new_expression_statement(span, refill, &self.ast);
        let check = Statement::new_if_statement(span, test, refill, None, &self.ast);
        self.put_first(body, check);
    }

    /// Ticks a loop's body: a counted tick for a pure loop, else a tick every turn.
    fn tick_loop(&mut self, weight: Option<u32>, body: &mut Statement<'a>) {
        match weight {
            Some(w) => {
                if let Some(counted) = self.counters.last_mut() {
                    *counted = true;
                }
                self.count_loop_body(body, w);
            }
            None => {
                use oxc::span::GetSpan;
                let tick = self.tick_statement(body.span());
                self.put_first(body, tick);
            }
        }
    }

    /// A loop's weight if it is pure (checked before its children are rewritten).
    /// A loop with no length in the source (made by a transform) has no weight to go by: it
    /// ticks every turn.
    fn pure_weight(&self, s: &Statement<'a>) -> Option<u32> {
        use oxc::span::GetSpan;
        let size = s.span().size();
        (size > 0 && self.numeric.pure_loop(s)).then_some(size)
    }

    /// A read of an assignment target that can be evaluated twice without side effects of its
    /// own: `x`, `o.p`, `o[k]` with `o` and `k` plain names or literals.
    fn reread(&self, target: &AssignmentTarget<'a>) -> Option<Expression<'a>> {
        use oxc::allocator::CloneIn;
        let plain = |e: &Expression<'a>| {
            matches!(
                e,
                Expression::Identifier(_)
                    | Expression::StringLiteral(_)
                    | Expression::NumericLiteral(_)
                    | Expression::ThisExpression(_)
            )
        };
        match target {
            AssignmentTarget::AssignmentTargetIdentifier(id) => {
                Some(Expression::Identifier(id.clone_in(self.alloc)))
            }
            AssignmentTarget::StaticMemberExpression(m) if plain(&m.object) => {
                Some(Expression::StaticMemberExpression(m.clone_in(self.alloc)))
            }
            AssignmentTarget::ComputedMemberExpression(m)
                if plain(&m.object) && plain(&m.expression) =>
            {
                Some(Expression::ComputedMemberExpression(m.clone_in(self.alloc)))
            }
            _ => None,
        }
    }
}

impl<'a> VisitMut<'a> for GuardConcatenation<'a> {
    fn visit_function_body(&mut self, it: &mut oxc::ast::ast::FunctionBody<'a>) {
        self.counters.push(false);
        walk_mut::walk_function_body(self, it);
        if self.counters.pop() == Some(true) {
            let declared = Parser::new(self.alloc, COUNTER_DECLARATION, SourceType::mjs())
                .parse()
                .program
                .body
                .into_iter()
                .next();
            it.statements.extend(declared);
            it.statements.rotate_right(1);
        }
        let tick = self.tick_statement(it.span);
        it.statements.insert(0, tick);
    }

    fn visit_arrow_function_expression(
        &mut self,
        it: &mut oxc::ast::ast::ArrowFunctionExpression<'a>,
    ) {
        walk_mut::walk_arrow_function_expression(self, it);
        if let Some(expr) = it.body.as_expression_mut() {
            use oxc::span::GetSpan;
            let span = expr.span();
            let value = expr.take_in(&self.ast);
            let both = oxc::allocator::Vec::from_iter_in([self.tick(span), value], &self.ast);
            *expr = Expression::new_sequence_expression(span, both, &self.ast);
        }
    }

    fn visit_statement(&mut self, it: &mut Statement<'a>) {
        let weight = self.pure_weight(it);
        walk_mut::walk_statement(self, it);
        match it {
            Statement::WhileStatement(w) => self.tick_loop(weight, &mut w.body),
            Statement::DoWhileStatement(w) => self.tick_loop(weight, &mut w.body),
            Statement::ForStatement(f) => self.tick_loop(weight, &mut f.body),
            // Never pure: each turn binds a value the loop did not compute.
            Statement::ForInStatement(f) => self.tick_loop(weight, &mut f.body),
            Statement::ForOfStatement(f) => self.tick_loop(weight, &mut f.body),
            _ => {}
        }
    }

    fn visit_expression(&mut self, expr: &mut Expression<'a>) {
        walk_mut::walk_expression(self, expr);
        match expr {
            // Two numbers add to a number: no string to bound.
            Expression::BinaryExpression(b)
                if b.operator == BinaryOperator::Addition
                    && !(self.numeric.typed(&b.left) && self.numeric.typed(&b.right)) =>
            {
                let span = b.span;
                let left = b.left.take_in(&self.ast);
                let right = b.right.take_in(&self.ast);
                *expr = self.guard(ADD_GUARD, span, vec![left, right]);
            }
            Expression::AssignmentExpression(a)
                if a.operator == AssignmentOperator::Addition && !self.numeric.assigns_typed(a) =>
            {
                if let Some(read) = self.reread(&a.left) {
                    let span = a.span;
                    let right = a.right.take_in(&self.ast);
                    a.right = self.guard(ADD_GUARD, span, vec![read, right]);
                    a.operator = AssignmentOperator::Assign;
                }
            }
            Expression::TemplateLiteral(t) if !t.expressions.is_empty() => {
                let span = t.span;
                let template = expr.take_in(&self.ast);
                *expr = self.guard(STRING_GUARD, span, vec![template]);
            }
            Expression::RegExpLiteral(r) => {
                let span = r.span;
                let source = Expression::new_string_literal(
                    span,
                    <oxc::str::Str as oxc::allocator::FromIn<&str>>::from_in(
                        r.regex.pattern.text.as_str(),
                        self.alloc,
                    ),
                    None,
                    &self.ast,
                );
                let flags = r.regex.flags.to_inline_string();
                let flags = Expression::new_string_literal(
                    span,
                    <oxc::str::Str as oxc::allocator::FromIn<&str>>::from_in(
                        flags.as_str(),
                        self.alloc,
                    ),
                    None,
                    &self.ast,
                );
                *expr = self.guard(REGEXP, span, vec![source, flags]);
            }
            _ => {}
        }
    }
}

const BODY_PREFIX: &str = "(async function (ctx, client, $) {\n";
const MODULE_PREFIX: &str = "(function () {\n";
const BODY_SUFFIX: &str = "\n})";

/// Checks the source against the size and nesting caps before any parser sees it: deep
/// nesting overflows recursive-descent parsers' native stacks.
pub fn check_shape(source: &str, caps: &ScriptCaps) -> Result<(), StripError> {
    if source.len() > caps.source_bytes {
        return Err(StripError::Cap(Cap::SourceSize));
    }
    // Brackets, and runs of prefix operators (`!!!!x`, `- - -x`), each count as a level.
    // Strings and comments are not skipped: that only overcounts.
    let mut depth: usize = 0;
    let mut prefix_run: usize = 0;
    for b in source.bytes() {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > caps.nesting {
                    return Err(StripError::Cap(Cap::Nesting));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        match b {
            b'!' | b'-' | b'+' | b'~' | b'?' | b':' | b'=' | b'>' => {
                prefix_run += 1;
                if prefix_run > caps.nesting * 4 {
                    return Err(StripError::Cap(Cap::Nesting));
                }
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => prefix_run = 0,
        }
    }
    Ok(())
}

fn line_col(text: &str, offset: u32) -> Position {
    let offset = (offset as usize).min(text.len());
    let before = &text[..offset];
    let line = before.bytes().filter(|b| *b == b'\n').count() as u32 + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    Position { line, column: col }
}

/// For a module with a default export: the byte range of `export default ` before its
/// declaration, which the module form replaces with `return `. Imports and other exports are
/// refused: a script reaches nothing but the SDK it is given.
fn default_export(source: &str) -> Result<Option<(usize, usize)>, StripError> {
    use oxc::span::GetSpan;
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, source, SourceType::ts()).parse();
    if !parsed.diagnostics.is_empty() {
        return Ok(None);
    }
    let mut found = None;
    for statement in &parsed.program.body {
        match statement {
            Statement::ExportDefaultDeclaration(d) => {
                found = Some((d.span.start as usize, d.declaration.span().start as usize));
            }
            Statement::ImportDeclaration(_)
            | Statement::ExportAllDeclaration(_)
            | Statement::ExportNamedDeclaration(_)
            | Statement::TSExportAssignment(_)
            | Statement::TSImportEqualsDeclaration(_) => {
                return Err(StripError::Syntax {
                    message: "imports and named exports are not available in lore scripts: use the `client` (or `$`) you are given, and `export default` the function".into(),
                    position: Some(line_col(source, statement.span().start)),
                });
            }
            _ => {}
        }
    }
    Ok(found)
}

/// Strips the types of `source` (TypeScript, either form).
pub fn strip(source: &str, caps: &ScriptCaps) -> Result<Stripped, StripError> {
    check_shape(source, caps)?;
    if let Some(offset) = source.find(RESERVED_PREFIX) {
        return Err(StripError::Syntax {
            message: format!("names starting with {RESERVED_PREFIX} are reserved for lore"),
            position: Some(line_col(source, offset as u32)),
        });
    }
    // Both forms become one function expression the engine evaluates: the body form is the
    // script's async function; the module form is a function that runs the module's top level
    // and returns its default export.
    let (form, text) = match default_export(source)? {
        Some((start, declaration)) => (
            Form::Module,
            format!(
                "{MODULE_PREFIX}{}return {}{BODY_SUFFIX}",
                &source[..start],
                &source[declaration..]
            ),
        ),
        None => (Form::Body, format!("{BODY_PREFIX}{source}{BODY_SUFFIX}")),
    };
    let line_shift = 1;
    let source_type = SourceType::ts().with_script(true);
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, &text, source_type).parse();
    if let Some(error) = parsed.diagnostics.first() {
        let offset = error.labels.as_ref().first().map(|l| l.offset());
        let position = offset.map(|o| {
            let p = line_col(&text, o);
            Position {
                line: p.line.saturating_sub(line_shift).max(1),
                column: p.column,
            }
        });
        return Err(StripError::Syntax {
            message: error.message.to_string(),
            position,
        });
    }
    let mut program = parsed.program;
    // Enums need their values evaluated while building scopes, or the transformer panics.
    let semantic = SemanticBuilder::new().with_enum_eval(true).build(&program);
    let scoping = semantic.semantic.into_scoping();
    let options = TransformOptions::default();
    let transformed = Transformer::new(&allocator, Path::new("script.ts"), &options)
        .build_with_scoping(scoping, &mut program);
    if let Some(error) = transformed.diagnostics.first() {
        return Err(StripError::Syntax {
            message: error.message.to_string(),
            position: None,
        });
    }
    let numeric = Numeric::of(&program);
    GuardConcatenation {
        ast: AstBuilder::new(&allocator),
        alloc: &allocator,
        numeric,
        counters: Vec::new(),
    }
    .visit_program(&mut program);
    let generated = Codegen::new()
        .with_options(CodegenOptions {
            source_map_path: Some("script.ts".into()),
            ..CodegenOptions::default()
        })
        .build(&program);
    let mut js = generated.code;
    // The wrapper is an expression statement; the engine's completion value is the function.
    while js.ends_with(['\n', ';']) {
        js.pop();
    }
    // Around it, on its first line (the wrapper's own: no script line moves), the function that
    // binds the guards.
    js = format!("{GUARDS_PREFIX}{js}{GUARDS_SUFFIX}");
    let mut map: Vec<Vec<(u32, u32, u32)>> = Vec::new();
    if let Some(sm) = generated.map {
        for token in sm.get_tokens() {
            let (gl, gc) = (token.get_dst_line() as usize, token.get_dst_col());
            if map.len() <= gl {
                map.resize(gl + 1, Vec::new());
            }
            let src_line = (token.get_src_line() + 1).saturating_sub(line_shift).max(1);
            map[gl].push((gc, src_line, token.get_src_col() + 1));
        }
        for line in &mut map {
            line.sort_unstable();
        }
    }
    Ok(Stripped { js, form, map })
}

impl Stripped {
    /// The script position of a 1-based position in the generated JavaScript: the nearest
    /// mapped point at or before it on that line, else the line's first point.
    pub fn original(&self, line: u32, column: u32) -> Option<Position> {
        let points = self.map.get(line.checked_sub(1)? as usize)?;
        let col0 = column.saturating_sub(1);
        let point = points
            .iter()
            .rev()
            .find(|(gc, _, _)| *gc <= col0)
            .or_else(|| points.first())?;
        Some(Position {
            line: point.1,
            column: point.2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> ScriptCaps {
        ScriptCaps::default()
    }

    #[test]
    fn strips_types_enums_and_keeps_the_body_form() {
        let s = strip(
            "enum Color { Red, Green }\ninterface P { a: number }\nconst p: P = { a: Color.Green };\nreturn p.a as number;",
            &caps(),
        )
        .unwrap();
        assert_eq!(s.form, Form::Body);
        assert!(!s.js.contains("interface"), "{}", s.js);
        assert!(s.js.starts_with(GUARDS_PREFIX), "{}", s.js);
        assert!(
            s.js[GUARDS_PREFIX.len()..].starts_with("(async function"),
            "{}",
            s.js
        );
        let names = GUARD_PARAMS.join(", ");
        assert!(
            GUARDS_PREFIX.contains(&format!("({names})")),
            "{GUARDS_PREFIX}"
        );
    }

    #[test]
    fn module_form_is_detected() {
        let s = strip(
            "export default async (ctx: any, client: any) => { return 1 }",
            &caps(),
        )
        .unwrap();
        assert_eq!(s.form, Form::Module);
    }

    #[test]
    fn syntax_errors_point_at_the_typescript_line() {
        let err = strip("const a: number = 1;\nconst b = ;\n", &caps()).unwrap_err();
        match err {
            StripError::Syntax { position, .. } => {
                assert_eq!(position.map(|p| p.line), Some(2), "{position:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("return {}1{};", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(
            strip(&deep, &caps()).err(),
            Some(StripError::Cap(Cap::Nesting))
        );
        let bangs = format!("return {}1;", "!".repeat(100_000));
        assert_eq!(
            strip(&bangs, &caps()).err(),
            Some(StripError::Cap(Cap::Nesting))
        );
    }

    #[test]
    fn maps_generated_positions_back() {
        let s = strip("const x: number = 1;\n\nthrow new Error('boom');", &caps()).unwrap();
        let line =
            s.js.lines()
                .position(|l| l.contains("throw"))
                .expect("throw kept") as u32
                + 1;
        let col =
            s.js.lines()
                .nth(line as usize - 1)
                .unwrap()
                .find("throw")
                .unwrap() as u32
                + 1;
        assert_eq!(s.original(line, col).map(|p| p.line), Some(3));
    }
}
