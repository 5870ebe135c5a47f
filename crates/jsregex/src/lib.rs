//! `lore-jsregex`: an ECMAScript (ES2025) `RegExp` matcher over UTF-16 input whose work is
//! bounded and counted.
//!
//! Tenant scripts in lore run in the Boa engine, whose stock matcher is an unbounded
//! backtracker. This crate replaces the matcher: [`Regex::new`] parses a pattern with
//! `oxc_regular_expression` (the full ES2025 grammar, Annex B included; module `source`
//! prepares the text, working around three oxc 0.146 gaps), lowers it to an owned tree whose
//! nodes carry their spec meaning (module `parse`, sets and case folding in `charset`),
//! rewrites it without changing any result (`rewrite`), compiles it into a small program
//! (`compile`), and [`Regex::exec`] runs the program on a backtracking VM with an explicit
//! stack (`vm`; no recursion while matching). Every instruction executed, every start
//! position tried, every backtrack entry popped and every code unit a literal run or a
//! backreference compares is one *step*; steps are reported to the caller's [`Budget`] at
//! least every 1,024 steps (and once at the end), and the budget may stop the search at any
//! report.
//!
//! # What is linear and what is only budgeted
//!
//! A search state — (choice point, input position) — that was explored is recorded in a
//! bitset (module `memo`) and not explored again within one `exec`, across start positions
//! too. That is sound only where the future of a state depends on the position alone, so a
//! choice point is memoized only if:
//!
//! * the pattern has no backreference (capture contents would steer the future; the memo
//!   is off for the whole pattern);
//! * it is not inside a counted loop that keeps an iteration counter (`{n,m}` too large to
//!   expand), nor that loop's own choice;
//! * it has at most three enclosing loops whose body can match empty. Such a body's future
//!   also depends on the iteration's entry position (the spec's empty-iteration check), but
//!   along one iteration the position only moves away from the entry, so all that matters is
//!   *whether* the position still equals the entry: one key bit per such loop.
//!
//! Inside a lookaround body the states recorded by one activation are kept only if the body
//! failed; when it succeeds (lookarounds are atomic) they are forgotten, as some lay on the
//! successful path. The memo is allocated once a search has spent more than
//! 4 × (input length + 1) steps, and only if it fits in 4 MiB (variants × (length + 1) bits).
//!
//! With it, `(a+)+$`, `(a|aa)+$`, `(a|a)*b`, `a*a*a*a*a*a*b`, `(x+x+)+y`, `^(\w+\s?)*$`,
//! `(\s*)+$`, `^(?:a|a?)+$`, `(\w+)*@` and an unanchored `(?=.*x)` take steps linear in the
//! input (a few dozen steps a character at most). Two rewrites help further: a quantified body that can
//! only match the empty string runs only its minimum iterations, and a trailing quantifier
//! of a lookaround body whose captures cannot show runs only its minimum, so `(?<=a*)b` and
//! `(?=(a+))*b` are linear too. Everything else is bounded only by the budget, doing the
//! work any backtracker does: patterns with backreferences (`(a*)*\1b`), counted loops too
//! large to expand (`(.*){1,32000}[bc]`), lookarounds that succeed or keep captures at many
//! start positions (`(?!.*a$).`, `(?<=(a+)+)b`), and inputs whose memo would exceed 4 MiB.
//! The backtrack stack grows by at most one entry (≤ 40 bytes) a step, so the budget bounds
//! memory as well.
//!
//! # Limits
//!
//! A pattern longer than 32,768 code units, nested deeper than 256 groups/classes, or
//! compiling to more than 100,000 instructions is [`Error::TooLarge`]. Counted repetition
//! `{n,m}` is expanded into copies of its body when the copies take at most 2,000
//! instructions, and otherwise runs as a loop with an iteration counter. Parsing recurses
//! once per nesting level: optimized builds of oxc's parser need well under 256 KiB of stack
//! at the deepest nesting, unoptimized ones about 20 KiB a level (build
//! `oxc_regular_expression` with `opt-level` ≥ 1 in dev profiles to keep that small).
//!
//! # Unsupported
//!
//! In `v` mode, class strings (`\q{..}` with a string of other than one character, and
//! properties of strings such as `\p{RGI_Emoji}`) are [`Error::Unsupported`].
//!
//! # Where this differs from the spec's letter
//!
//! In `u`/`v` mode a start inside a surrogate pair matches from the pair's beginning, and a
//! match found there reports that beginning as its start (see [`Regex::exec`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod budget;
mod charset;
mod compile;
mod flags;
mod memo;
mod parse;
mod rewrite;
mod source;
mod vm;

use std::fmt;

pub use budget::{Budget, Captures, Stopped};
pub use flags::{Error, Flags};

/// A compiled ECMAScript regular expression.
#[derive(Clone)]
pub struct Regex {
    flags: Flags,
    names: Vec<(String, usize)>,
    prog: compile::Program,
}

impl fmt::Debug for Regex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Regex")
            .field("flags", &self.flags)
            .field("groups", &self.prog.groups)
            .field("names", &self.names)
            .field("instructions", &self.prog.insts.len())
            .finish()
    }
}

impl Regex {
    /// Compiles a regular expression.
    ///
    /// `pattern` is the RegExp source as a JS string (UTF-16 code units, may hold lone
    /// surrogates); `flags` the flags string ("dgimsuvy"; unknown/duplicate flags, or u with
    /// v, are a SyntaxError).
    pub fn new(pattern: &[u16], flags: &str) -> Result<Regex, Error> {
        let parsed_flags = Flags::parse(flags)?;
        let tree = parse::parse(pattern, flags, parsed_flags)?;
        let prog = compile::compile(&tree, parsed_flags)?;
        Ok(Regex {
            flags: parsed_flags,
            names: tree.names,
            prog,
        })
    }

    /// The parsed flags.
    pub fn flags(&self) -> Flags {
        self.flags
    }

    /// The number of capturing groups, not counting group 0.
    pub fn group_count(&self) -> usize {
        self.prog.groups
    }

    /// Named groups in source order with their 1-based index (duplicate names in different
    /// alternatives, allowed in ES2025, are each listed).
    pub fn group_names(&self) -> &[(String, usize)] {
        &self.names
    }

    /// The first match at or after `start` (only at `start` if the sticky flag is set), as
    /// the spec's RegExpBuiltinExec search loop would find it: slot 0 is the whole match,
    /// slot i group i, each as code-unit offsets into `input`. `start > input.len()` is no
    /// match.
    ///
    /// In `u`/`v` mode a `start` between the halves of a surrogate pair starts matching at
    /// the pair's beginning (the character that contains element `start`), and a match found
    /// there reports the pair's beginning as its start. (The spec's RegExpBuiltinExec would
    /// report `start` itself as the index, which for an empty match there gives a Match Record
    /// ending before it starts; the pair's beginning is what was matched.)
    pub fn exec(
        &self,
        input: &[u16],
        start: usize,
        budget: &mut dyn Budget,
    ) -> Result<Option<Captures>, Stopped> {
        vm::exec(&self.prog, self.flags, input, start, budget)
    }
}
