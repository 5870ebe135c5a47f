//! The memo of explored search states: a bitset of (choice-point row, position), with a log
//! of the bits set inside lookaround bodies so that a body that succeeds can forget them.

/// Largest memo, in bits (4 MiB).
const MAX_BITS: usize = 32 * 1024 * 1024;

/// Explored (row, position) states of one `exec`.
pub(crate) struct Memo {
    bits: Vec<u64>,
    stride: usize,
    log: Vec<usize>,
}

impl Memo {
    /// A memo for `rows` rows over positions `0..=len`, or `None` if it would exceed 4 MiB.
    pub(crate) fn new(rows: usize, len: usize) -> Option<Memo> {
        let stride = len.checked_add(1)?;
        let total = rows.checked_mul(stride)?;
        if rows == 0 || total > MAX_BITS {
            return None;
        }
        Some(Memo {
            bits: vec![0; total.div_ceil(64)],
            stride,
            log: Vec::new(),
        })
    }

    /// Marks state (`row`, `pos`); returns whether it was already marked. Marks made while
    /// `logged` (inside a lookaround body) are remembered for [`Memo::forget_since`].
    pub(crate) fn visit(&mut self, row: usize, pos: usize, logged: bool) -> bool {
        let i = row * self.stride + pos;
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.bits[w] & b != 0 {
            return true;
        }
        self.bits[w] |= b;
        if logged {
            self.log.push(i);
        }
        false
    }

    /// The current length of the log (a lookaround frame's mark).
    pub(crate) fn mark(&self) -> usize {
        self.log.len()
    }

    /// A lookaround body succeeded: unmark the states it marked after `mark`.
    pub(crate) fn forget_since(&mut self, mark: usize) -> usize {
        let n = self.log.len().saturating_sub(mark);
        for &i in &self.log[mark.min(self.log.len())..] {
            self.bits[i / 64] &= !(1u64 << (i % 64));
        }
        self.log.truncate(mark);
        n
    }

    /// A lookaround body failed: its marks are real failures; keep them, drop their log.
    pub(crate) fn keep_since(&mut self, mark: usize) {
        self.log.truncate(mark);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visit_and_forget() {
        let mut m = Memo::new(2, 10).unwrap();
        assert!(!m.visit(1, 3, false));
        assert!(m.visit(1, 3, false));
        let mark = m.mark();
        assert!(!m.visit(0, 10, true));
        assert_eq!(m.forget_since(mark), 1);
        assert!(!m.visit(0, 10, true));
        m.keep_since(mark);
        assert!(m.visit(0, 10, false));
        assert!(Memo::new(1 << 20, 1 << 20).is_none());
    }
}
