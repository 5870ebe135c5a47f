//! What a pattern is compiled with and what stops it compiling: its [`Flags`], the size
//! limits, and the compile [`Error`].

/// The flags of a compiled [`Regex`](crate::Regex), as parsed from its flags string.
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
    pub(crate) fn parse(flags: &str) -> Result<Flags, Error> {
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
    pub(crate) fn either_unicode(self) -> bool {
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

/// Longest accepted pattern source, in UTF-16 code units.
pub(crate) const MAX_PATTERN_UNITS: usize = 32_768;
/// Deepest accepted nesting of groups and classes.
pub(crate) const MAX_NESTING: usize = 256;
/// Largest accepted compiled program, in instructions.
pub(crate) const MAX_INSTRUCTIONS: usize = 100_000;
