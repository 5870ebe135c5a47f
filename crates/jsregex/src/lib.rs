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

mod charset;
mod compile;
mod memo;
mod parse;
mod rewrite;
mod source;
mod vm;

use std::fmt;

/// The flags of a compiled [`Regex`], as parsed from its flags string.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `g`: global (only recorded; the caller's `lastIndex` handling uses it).
    pub global: bool,
    /// `i`: case-insensitive matching.
    pub ignore_case: bool,
    /// `m`: `^` and `$` also match at line terminators.
    pub multiline: bool,
    /// `s`: `.` also matches line terminators.
    pub dot_all: bool,
    /// `u`: Unicode mode (input and pattern are code points).
    pub unicode: bool,
    /// `v`: Unicode sets mode (Unicode mode plus class set operations).
    pub unicode_sets: bool,
    /// `y`: sticky (match only at the start position).
    pub sticky: bool,
    /// `d`: has indices (only recorded; every exec reports indices anyway).
    pub has_indices: bool,
}

impl Flags {
    /// Parses a flags string; an unknown or repeated flag, or `u` with `v`, is a SyntaxError.
    fn parse(flags: &str) -> Result<Flags, Error> {
        let mut f = Flags::default();
        let bad = || Error::Syntax(format!("Invalid regular expression flags '{flags}'"));
        for c in flags.chars() {
            let slot = match c {
                'd' => &mut f.has_indices,
                'g' => &mut f.global,
                'i' => &mut f.ignore_case,
                'm' => &mut f.multiline,
                's' => &mut f.dot_all,
                'u' => &mut f.unicode,
                'v' => &mut f.unicode_sets,
                'y' => &mut f.sticky,
                _ => return Err(bad()),
            };
            if *slot {
                return Err(bad());
            }
            *slot = true;
        }
        if f.unicode && f.unicode_sets {
            return Err(bad());
        }
        Ok(f)
    }

    /// Whether either Unicode flag (`u` or `v`) is set.
    fn either_unicode(self) -> bool {
        self.unicode || self.unicode_sets
    }
}

/// Why a pattern could not be compiled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The pattern or the flags are not valid ECMAScript (a `SyntaxError` in JS).
    #[error("{0}")]
    Syntax(String),
    /// The pattern exceeds one of this crate's size limits.
    #[error("{0}")]
    TooLarge(String),
    /// The pattern is valid but uses a feature this engine does not implement.
    #[error("{0}")]
    Unsupported(String),
}

/// Opaque marker returned when a [`Budget`] stops a search; the caller knows why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("regular expression search stopped by its budget")
    }
}

impl std::error::Error for Stopped {}

/// Work accounting for [`Regex::exec`].
///
/// The matcher calls `spend(n)` with the steps it did since the last call, at least every
/// 1,024 steps and once before `exec` returns; an `Err` from `spend` stops the search at
/// once and `exec` returns that `Err`.
pub trait Budget {
    /// Charges `steps` steps; return `Err(Stopped)` to stop the search.
    fn spend(&mut self, steps: u64) -> Result<(), Stopped>;
}

/// The result of a successful [`Regex::exec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captures {
    /// Slot 0 is the whole match, slot `i` capturing group `i`; each is a pair of code-unit
    /// offsets `(start, end)` into the input, or `None` for a group that did not participate.
    pub slots: Vec<Option<(usize, usize)>>,
}

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

/// Longest accepted pattern source, in UTF-16 code units.
pub(crate) const MAX_PATTERN_UNITS: usize = 32_768;
/// Deepest accepted nesting of groups and classes.
pub(crate) const MAX_NESTING: usize = 256;
/// Largest accepted compiled program, in instructions.
pub(crate) const MAX_INSTRUCTIONS: usize = 100_000;

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
