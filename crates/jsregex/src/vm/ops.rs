//! The VM's larger operations: assertions, backreferences, single-character repetition,
//! and backtracking.

use super::{Frame, MemoState, NONE, Vm, is_lead, is_trail, pair};
use crate::budget::Stopped;
use crate::charset::{canon_cp, canon_unit, is_line_terminator, is_word_unit};
use crate::compile::{INF, Inst};
use crate::parse::Assertion;

impl Vm<'_> {
    pub(super) fn assert(&self, kind: Assertion, pos: usize) -> bool {
        let inp = self.input;
        match kind {
            Assertion::Start { multiline } => {
                pos == 0 || (multiline && is_line_terminator(inp[pos - 1]))
            }
            Assertion::End { multiline } => {
                pos == inp.len() || (multiline && is_line_terminator(inp[pos]))
            }
            Assertion::Boundary {
                negated,
                unicode_icase,
            } => {
                let a = pos > 0 && is_word_unit(inp[pos - 1], unicode_icase);
                let b = pos < inp.len() && is_word_unit(inp[pos], unicode_icase);
                (a != b) != negated
            }
        }
    }

    /// Matches a backreference at `pos`; the new position, or `None` on failure.
    pub(super) fn backref(
        &mut self,
        start: u32,
        len: u32,
        icase: bool,
        back: bool,
        pos: usize,
    ) -> Result<Option<usize>, Stopped> {
        let refs = &self.prog.refs[start as usize..(start + len) as usize];
        let Some((s, e)) = refs.iter().find_map(|&g| {
            let (a, b) = (self.slots[2 * g as usize], self.slots[2 * g as usize + 1]);
            (a != NONE && b != NONE).then_some((a, b))
        }) else {
            return Ok(Some(pos));
        };
        let len = e - s;
        if !self.unicode {
            let at = if back {
                match pos.checked_sub(len) {
                    Some(a) => a,
                    None => return Ok(None),
                }
            } else if pos + len <= self.input.len() {
                pos
            } else {
                return Ok(None);
            };
            for i in 0..len {
                self.tick(1)?;
                let (a, b) = (self.input[s + i], self.input[at + i]);
                if a != b && !(icase && canon_unit(a) == canon_unit(b)) {
                    return Ok(None);
                }
            }
            return Ok(Some(if back { at } else { pos + len }));
        }
        // Unicode mode: compare code points, so that a lone surrogate never matches half of
        // a pair.
        let (mut p, mut q) = if back { (e, pos) } else { (s, pos) };
        loop {
            if (back && p <= s) || (!back && p >= e) {
                return Ok(Some(q));
            }
            let (a, p2) = if back {
                let u = self.input[p - 1];
                if is_trail(u) && p - 1 > s && is_lead(self.input[p - 2]) {
                    (pair(self.input[p - 2], u), p - 2)
                } else {
                    (u32::from(u), p - 1)
                }
            } else {
                let u = self.input[p];
                if is_lead(u) && p + 1 < e && is_trail(self.input[p + 1]) {
                    (pair(u, self.input[p + 1]), p + 2)
                } else {
                    (u32::from(u), p + 1)
                }
            };
            for _ in 0..p.abs_diff(p2) {
                self.tick(1)?;
            }
            let Some((b, q2)) = self.step(q, back) else {
                return Ok(None);
            };
            if a != b && !(icase && canon_cp(a) == canon_cp(b)) {
                return Ok(None);
            }
            (p, q) = (p2, q2);
        }
    }

    /// Pops the top entry, applying it if it restores a slot or register.
    pub(super) fn undo_top(&mut self) {
        match self.stack.pop() {
            Some(Frame::Slot { slot, old }) => self.slots[slot as usize] = old,
            Some(Frame::Reg { reg, old }) => self.regs[reg as usize] = old,
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn rep_set(
        &mut self,
        pc: u32,
        set: u32,
        min: u64,
        max: u64,
        greedy: bool,
        back: bool,
        memo: u32,
        pos: usize,
    ) -> Result<Option<usize>, Stopped> {
        let mut x = pos;
        let mut count = 0u64;
        while count < min {
            self.tick(1)?;
            match self.step(x, back) {
                Some((c, p)) if self.prog.sets[set as usize].has(c) => x = p,
                _ => return Ok(None),
            }
            count += 1;
        }
        let lo = x;
        if self.seen(memo, lo) {
            return Ok(None);
        }
        if greedy {
            while count < max {
                self.tick(1)?;
                match self.step(x, back) {
                    Some((c, p)) if self.prog.sets[set as usize].has(c) => {
                        // A loop state explored before: its iterations were all tried.
                        if self.seen(memo, p) {
                            break;
                        }
                        x = p;
                    }
                    _ => break,
                }
                if max != INF {
                    count += 1;
                }
            }
            if x != lo {
                self.stack.push(Frame::GiveBack { pc, lo, cur: x });
            }
        } else if count < max {
            self.stack.push(Frame::Take { pc, cur: lo, count });
        }
        Ok(Some(x))
    }

    /// Pops entries until one resumes the search; `None` when the stack is empty.
    pub(super) fn backtrack(&mut self) -> Result<Option<(usize, usize)>, Stopped> {
        loop {
            self.tick(1)?;
            let Some(f) = self.stack.pop() else {
                return Ok(None);
            };
            match f {
                Frame::Alt { pc, pos } => return Ok(Some((pc as usize, pos))),
                Frame::Slot { slot, old } => self.slots[slot as usize] = old,
                Frame::Reg { reg, old } => self.regs[reg as usize] = old,
                Frame::GiveBack { pc, lo, cur } => {
                    let Inst::RepSet { back, .. } = self.prog.insts[pc as usize] else {
                        unreachable!("GiveBack without its RepSet");
                    };
                    // Step one character back towards `lo` (the reverse of the way in).
                    let x = if back {
                        match self.next_char(cur) {
                            Some((_, p)) if p <= lo => p,
                            _ => lo,
                        }
                    } else {
                        match self.prev_char(cur) {
                            Some((_, p)) if p >= lo => p,
                            _ => lo,
                        }
                    };
                    if x != lo {
                        self.stack.push(Frame::GiveBack { pc, lo, cur: x });
                    }
                    return Ok(Some((pc as usize + 1, x)));
                }
                Frame::Take { pc, cur, count } => {
                    let Inst::RepSet {
                        set,
                        max,
                        back,
                        memo,
                        ..
                    } = self.prog.insts[pc as usize]
                    else {
                        unreachable!("Take without its RepSet");
                    };
                    if let Some((c, p)) = self.step(cur, back)
                        && self.prog.sets[set as usize].has(c)
                        && !self.seen(memo, p)
                    {
                        let count = if max == INF { count } else { count + 1 };
                        if count < max {
                            self.stack.push(Frame::Take { pc, cur: p, count });
                        }
                        return Ok(Some((pc as usize + 1, p)));
                    }
                }
                Frame::Look {
                    pos,
                    prev,
                    negative,
                    end,
                    mark,
                } => {
                    // The body failed: its memo marks are real failures.
                    if let MemoState::Active(m) = &mut self.memo {
                        m.keep_since(mark);
                    }
                    self.look_top = prev;
                    if negative {
                        return Ok(Some((end as usize, pos)));
                    }
                }
            }
        }
    }
}
