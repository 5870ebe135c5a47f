//! What a search reports: the steps it spends against a [`Budget`], and the [`Captures`] it
//! finds.

use std::fmt;

/// Opaque marker returned when a [`Budget`] stops a search; the caller knows why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("regular expression search stopped by its budget")
    }
}

impl std::error::Error for Stopped {}

/// Work accounting for [`Regex::exec`](crate::Regex::exec).
///
/// The matcher calls `spend(n)` with the steps it did since the last call, at least every
/// 1,024 steps and once before `exec` returns; an `Err` from `spend` stops the search at
/// once and `exec` returns that `Err`.
pub trait Budget {
    /// Charges `steps` steps; return `Err(Stopped)` to stop the search.
    fn spend(&mut self, steps: u64) -> Result<(), Stopped>;
}

/// The result of a successful [`Regex::exec`](crate::Regex::exec).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captures {
    /// Slot 0 is the whole match, slot `i` capturing group `i`; each is a pair of code-unit
    /// offsets `(start, end)` into the input, or `None` for a group that did not participate.
    pub slots: Vec<Option<(usize, usize)>>,
}
