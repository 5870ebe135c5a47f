//! The backtracking VM: the spec's RegExpBuiltinExec search loop, an explicit backtrack
//! stack (no recursion while matching), and step accounting against the caller's budget.

mod ops;
#[cfg(test)]
mod tests;

use crate::budget::{Budget, Captures, Stopped};
use crate::compile::{Inst, NO_MEMO, Program};
use crate::flags::Flags;
use crate::memo::Memo;

/// "No value" for slots and registers.
const NONE: usize = usize::MAX;
/// Report steps to the budget at least this often.
const REPORT_EVERY: u64 = 1024;

/// A backtrack stack entry.
#[derive(Clone, Copy, Debug)]
enum Frame {
    /// Resume at `pc` with `pos`.
    Alt { pc: u32, pos: usize },
    /// Restore capture slot `slot` to `old`.
    Slot { slot: u32, old: usize },
    /// Restore register `reg` to `old`.
    Reg { reg: u32, old: usize },
    /// Greedy `RepSet` at `pc`: give back one character from `cur` (not past `lo`).
    GiveBack { pc: u32, lo: usize, cur: usize },
    /// Lazy `RepSet` at `pc`: take one more character at `cur` (having taken `count`).
    Take { pc: u32, cur: usize, count: u64 },
    /// An active lookaround begun at `pos`; reaching it while backtracking means its body
    /// failed. `prev` is the enclosing lookaround frame, `mark` the memo log length.
    Look {
        pos: usize,
        prev: usize,
        negative: bool,
        end: u32,
        mark: usize,
    },
}

enum MemoState {
    /// Not yet allocated; allocate once `steps` exceeds the threshold.
    Pending(u64),
    Active(Memo),
    Off,
}

struct Vm<'a> {
    prog: &'a Program,
    input: &'a [u16],
    unicode: bool,
    slots: Vec<usize>,
    regs: Vec<usize>,
    stack: Vec<Frame>,
    look_top: usize,
    steps: u64,
    pending: u64,
    budget: &'a mut dyn Budget,
    memo: MemoState,
}

const fn is_lead(u: u16) -> bool {
    matches!(u, 0xD800..=0xDBFF)
}

const fn is_trail(u: u16) -> bool {
    matches!(u, 0xDC00..=0xDFFF)
}

fn pair(lead: u16, trail: u16) -> u32 {
    0x10000 + ((u32::from(lead) - 0xD800) << 10) + (u32::from(trail) - 0xDC00)
}

/// Runs the spec's search loop from `start`.
pub(crate) fn exec(
    prog: &Program,
    flags: Flags,
    input: &[u16],
    start: usize,
    budget: &mut dyn Budget,
) -> Result<Option<Captures>, Stopped> {
    let after = 4 * (input.len() as u64 + 1);
    exec_with(prog, flags, input, start, budget, Some(after))
}

/// [`exec`], with the memo allocated once more than `memo_after` steps were spent (never,
/// for `None`).
fn exec_with(
    prog: &Program,
    flags: Flags,
    input: &[u16],
    start: usize,
    budget: &mut dyn Budget,
    memo_after: Option<u64>,
) -> Result<Option<Captures>, Stopped> {
    let unicode = flags.either_unicode();
    let mut vm = Vm {
        prog,
        input,
        unicode,
        slots: vec![NONE; 2 * (prog.groups + 1)],
        regs: vec![NONE; prog.regs],
        stack: Vec::new(),
        look_top: NONE,
        steps: 0,
        pending: 0,
        budget,
        memo: match memo_after {
            Some(after) if prog.memo_rows > 0 => MemoState::Pending(after),
            _ => MemoState::Off,
        },
    };
    let result = vm.search(start, flags.sticky);
    let rest = vm.pending;
    vm.pending = 0;
    let found = result?;
    vm.budget.spend(rest)?;
    Ok(found)
}

impl Vm<'_> {
    fn search(&mut self, start: usize, sticky: bool) -> Result<Option<Captures>, Stopped> {
        let n = self.input.len();
        let mut last = start;
        loop {
            if last > n {
                return Ok(None);
            }
            self.tick(1)?;
            // The character that contains element `last` (in Unicode mode `last` may fall
            // inside a surrogate pair).
            let at = if self.unicode
                && last > 0
                && last < n
                && is_trail(self.input[last])
                && is_lead(self.input[last - 1])
            {
                last - 1
            } else {
                last
            };
            if let Some(end) = self.run(at)? {
                let mut slots = Vec::with_capacity(self.prog.groups + 1);
                slots.push(Some((at, end)));
                for g in 1..=self.prog.groups {
                    let (a, b) = (self.slots[2 * g], self.slots[2 * g + 1]);
                    slots.push((a != NONE && b != NONE).then_some((a, b)));
                }
                return Ok(Some(Captures { slots }));
            }
            if sticky {
                return Ok(None);
            }
            // AdvanceStringIndex.
            last += if self.unicode
                && last + 1 < n
                && is_lead(self.input[last])
                && is_trail(self.input[last + 1])
            {
                2
            } else {
                1
            };
        }
    }

    fn tick(&mut self, n: u64) -> Result<(), Stopped> {
        self.steps += n;
        self.pending += n;
        if self.pending >= REPORT_EVERY {
            let p = self.pending;
            self.pending = 0;
            self.budget.spend(p)?;
        }
        Ok(())
    }

    /// The character after `pos` and the position past it.
    fn next_char(&self, pos: usize) -> Option<(u32, usize)> {
        let u = *self.input.get(pos)?;
        if self.unicode
            && is_lead(u)
            && let Some(&t) = self.input.get(pos + 1).filter(|&&t| is_trail(t))
        {
            return Some((pair(u, t), pos + 2));
        }
        Some((u32::from(u), pos + 1))
    }

    /// The character before `pos` and the position before it.
    fn prev_char(&self, pos: usize) -> Option<(u32, usize)> {
        if pos == 0 {
            return None;
        }
        let u = self.input[pos - 1];
        if self.unicode && is_trail(u) && pos >= 2 && is_lead(self.input[pos - 2]) {
            return Some((pair(self.input[pos - 2], u), pos - 2));
        }
        Some((u32::from(u), pos - 1))
    }

    fn step(&self, pos: usize, back: bool) -> Option<(u32, usize)> {
        if back {
            self.prev_char(pos)
        } else {
            self.next_char(pos)
        }
    }

    fn set_slot(&mut self, slot: usize, v: usize) {
        let old = self.slots[slot];
        if old != v {
            self.stack.push(Frame::Slot {
                slot: slot as u32,
                old,
            });
            self.slots[slot] = v;
        }
    }

    fn set_reg(&mut self, reg: u32, v: usize) {
        let old = self.regs[reg as usize];
        if old != v {
            self.stack.push(Frame::Reg { reg, old });
            self.regs[reg as usize] = v;
        }
    }

    /// Whether state (`memo`, `pos`) was explored before; marks it. Allocates the memo once
    /// the search has done enough work to make it worthwhile.
    fn seen(&mut self, memo: u32, pos: usize) -> bool {
        if memo == NO_MEMO {
            return false;
        }
        if let MemoState::Pending(threshold) = self.memo {
            if self.steps <= threshold {
                return false;
            }
            self.memo = match Memo::new(self.prog.memo_rows, self.input.len()) {
                Some(m) => MemoState::Active(m),
                None => MemoState::Off,
            };
        }
        let MemoState::Active(m) = &mut self.memo else {
            return false;
        };
        let point = &self.prog.memo_points[memo as usize];
        let mut variant = 0usize;
        for (k, &r) in point.regs.iter().enumerate() {
            if self.regs[r as usize] == pos {
                variant |= 1 << k;
            }
        }
        m.visit(point.base as usize + variant, pos, self.look_top != NONE)
    }

    fn memo_mark(&self) -> usize {
        match &self.memo {
            MemoState::Active(m) => m.mark(),
            _ => 0,
        }
    }

    /// Runs the program from `start`; the match end, or `None`.
    fn run(&mut self, start: usize) -> Result<Option<usize>, Stopped> {
        self.stack.clear();
        self.slots.fill(NONE);
        self.look_top = NONE;
        let mut pc = 0usize;
        let mut pos = start;
        loop {
            self.tick(1)?;
            let ok = match self.prog.insts[pc] {
                Inst::Char { c, back } => match self.step(pos, back) {
                    Some((ch, p)) if ch == c => {
                        pos = p;
                        true
                    }
                    _ => false,
                },
                Inst::Set { set, back } => match self.step(pos, back) {
                    Some((ch, p)) if self.prog.sets[set as usize].has(ch) => {
                        pos = p;
                        true
                    }
                    _ => false,
                },
                Inst::Lit { start, len, back } => {
                    let prog = self.prog;
                    let lit = &prog.lits[start as usize..(start + len) as usize];
                    let len = len as usize;
                    match if back {
                        pos.checked_sub(len)
                    } else {
                        Some(pos)
                    } {
                        Some(a) if a + len <= self.input.len() => {
                            let mut same = true;
                            for (&x, &y) in self.input[a..a + len].iter().zip(lit) {
                                self.tick(1)?;
                                if x != y {
                                    same = false;
                                    break;
                                }
                            }
                            if same {
                                pos = if back { a } else { a + len };
                            }
                            same
                        }
                        _ => false,
                    }
                }
                Inst::RepSet {
                    set,
                    min,
                    max,
                    greedy,
                    back,
                    memo,
                } => match self.rep_set(pc as u32, set, min, max, greedy, back, memo, pos)? {
                    Some(p) => {
                        pos = p;
                        true
                    }
                    None => false,
                },
                Inst::Split { x, y, memo } => {
                    if self.seen(memo, pos) {
                        false
                    } else {
                        self.stack.push(Frame::Alt { pc: y, pos });
                        pc = x as usize;
                        continue;
                    }
                }
                Inst::Jmp { to } => {
                    pc = to as usize;
                    continue;
                }
                Inst::Save { slot } => {
                    self.set_slot(slot as usize, pos);
                    true
                }
                Inst::ResetCaps { lo, hi } => {
                    for s in lo..hi {
                        self.tick(1)?;
                        self.set_slot(s as usize, NONE);
                    }
                    true
                }
                Inst::SetEntry { reg } => {
                    self.set_reg(reg, pos);
                    true
                }
                Inst::ClearEntry { reg } => {
                    self.set_reg(reg, NONE);
                    true
                }
                Inst::CheckEmpty { reg } => self.regs[reg as usize] != pos,
                Inst::CountInit { reg } => {
                    self.set_reg(reg, 0);
                    true
                }
                Inst::CountHead {
                    reg,
                    min,
                    max,
                    greedy,
                    exit,
                } => {
                    let count = self.regs[reg as usize] as u64;
                    if count < min {
                        true
                    } else if count >= max {
                        pc = exit as usize;
                        continue;
                    } else if greedy {
                        self.stack.push(Frame::Alt { pc: exit, pos });
                        true
                    } else {
                        self.stack.push(Frame::Alt {
                            pc: pc as u32 + 1,
                            pos,
                        });
                        pc = exit as usize;
                        continue;
                    }
                }
                Inst::CountEnter { reg, entry, min } => {
                    let v = if self.regs[reg as usize] as u64 >= min {
                        pos
                    } else {
                        NONE
                    };
                    self.set_reg(entry, v);
                    true
                }
                Inst::CountIncr { reg, head } => {
                    let v = self.regs[reg as usize].saturating_add(1);
                    self.set_reg(reg, v);
                    pc = head as usize;
                    continue;
                }
                Inst::Assert { kind } => self.assert(kind, pos),
                Inst::BackRef {
                    start,
                    len,
                    icase,
                    back,
                } => match self.backref(start, len, icase, back, pos)? {
                    Some(p) => {
                        pos = p;
                        true
                    }
                    None => false,
                },
                Inst::LookStart { negative, end } => {
                    let mark = self.memo_mark();
                    self.stack.push(Frame::Look {
                        pos,
                        prev: self.look_top,
                        negative,
                        end,
                        mark,
                    });
                    self.look_top = self.stack.len() - 1;
                    true
                }
                Inst::LookEnd => {
                    let top = self.look_top;
                    let Frame::Look {
                        pos: at,
                        prev,
                        negative,
                        end,
                        mark,
                    } = self.stack[top]
                    else {
                        unreachable!("LookEnd without its frame");
                    };
                    let forgotten = match &mut self.memo {
                        MemoState::Active(m) => m.forget_since(mark),
                        _ => 0,
                    };
                    for _ in 0..forgotten {
                        self.tick(1)?;
                    }
                    self.look_top = prev;
                    if negative {
                        // The body matched, so the negative lookaround fails: undo it all.
                        while self.stack.len() > top + 1 {
                            self.tick(1)?;
                            self.undo_top();
                        }
                        self.stack.pop();
                        false
                    } else {
                        // Atomic: drop the body's choice points, keep its undo entries.
                        let mut w = top;
                        for r in top + 1..self.stack.len() {
                            self.tick(1)?;
                            let f = self.stack[r];
                            if matches!(f, Frame::Slot { .. } | Frame::Reg { .. }) {
                                self.stack[w] = f;
                                w += 1;
                            }
                        }
                        self.stack.truncate(w);
                        pos = at;
                        pc = end as usize;
                        continue;
                    }
                }
                Inst::Match => {
                    self.slots[0] = start;
                    self.slots[1] = pos;
                    return Ok(Some(pos));
                }
            };
            if ok {
                pc += 1;
            } else {
                match self.backtrack()? {
                    Some((p, q)) => {
                        pc = p;
                        pos = q;
                    }
                    None => return Ok(None),
                }
            }
        }
    }
}
