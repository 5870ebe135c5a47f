//! Compilation of the lowered tree into a program for the backtracking VM, with the
//! result-preserving rewrites and the analysis of where memoization is sound.

use std::collections::HashMap;

use crate::charset::CharSet;
use crate::flags::{Error, Flags, MAX_INSTRUCTIONS};
use crate::parse::{Assertion, Node, Tree};
use crate::rewrite::{EXPAND_LIMIT, estimate, group_slots, len_range, simplify};

/// "No value" for memo ids.
pub(crate) const NO_MEMO: u32 = u32::MAX;
/// Unbounded repetition.
pub(crate) const INF: u64 = u64::MAX;
/// Most enclosing empty-checked loops a memoized choice point may have.
const MAX_MEMO_REGS: usize = 3;

/// One VM instruction. `back` instructions read the input right to left (lookbehind).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Inst {
    /// One character equal to `c`.
    Char { c: u32, back: bool },
    /// One character in set `set`.
    Set { set: u32, back: bool },
    /// Code units `lits[start..start + len]`, compared exactly.
    Lit { start: u32, len: u32, back: bool },
    /// `min..=max` characters of set `set`, greedy or lazy, with one backtrack entry.
    RepSet {
        set: u32,
        min: u64,
        max: u64,
        greedy: bool,
        back: bool,
        memo: u32,
    },
    /// Continue at `x`; on backtrack, at `y`.
    Split { x: u32, y: u32, memo: u32 },
    /// Continue at `to`.
    Jmp { to: u32 },
    /// Record the position in capture slot `slot`.
    Save { slot: u32 },
    /// Clear capture slots `lo..hi` (a quantified group's captures, per iteration).
    ResetCaps { lo: u32, hi: u32 },
    /// Register `reg` := position (an iteration's entry, for the empty check).
    SetEntry { reg: u32 },
    /// Register `reg` := none (the first iteration of `+`, which has no empty check).
    ClearEntry { reg: u32 },
    /// Fail if register `reg` equals the position (an iteration past the minimum matched empty).
    CheckEmpty { reg: u32 },
    /// Counter `reg` := 0.
    CountInit { reg: u32 },
    /// Loop decision from counter `reg`: iterate (fall through) or leave (to `exit`).
    CountHead {
        reg: u32,
        min: u64,
        max: u64,
        greedy: bool,
        exit: u32,
    },
    /// Entry register `entry` := position if counter `reg` has reached `min`, else none.
    CountEnter { reg: u32, entry: u32, min: u64 },
    /// Counter `reg` += 1, continue at `head`.
    CountIncr { reg: u32, head: u32 },
    /// A zero-width assertion.
    Assert { kind: Assertion },
    /// Backreference to the first participating group of `refs[start..start + len]`.
    BackRef {
        start: u32,
        len: u32,
        icase: bool,
        back: bool,
    },
    /// Begin a lookaround whose code ends just before `end`.
    LookStart { negative: bool, end: u32 },
    /// The lookaround body matched.
    LookEnd,
    /// The whole pattern matched.
    Match,
}

/// A character set as the VM reads it.
#[derive(Clone, Debug)]
pub(crate) struct SetData {
    ascii: u128,
    ranges: Box<[(u32, u32)]>,
}

impl SetData {
    fn new(set: &CharSet) -> SetData {
        let mut ascii = 0u128;
        for &(a, b) in set.ranges() {
            for c in a..=b.min(127) {
                ascii |= 1 << c;
            }
        }
        SetData {
            ascii,
            ranges: set.ranges().into(),
        }
    }

    /// Whether `c` is in the set.
    pub(crate) fn has(&self, c: u32) -> bool {
        if c < 128 {
            return self.ascii & (1 << c) != 0;
        }
        let i = self.ranges.partition_point(|&(_, b)| b < c);
        i < self.ranges.len() && self.ranges[i].0 <= c
    }
}

/// A memoized choice point: its first bitset row, and the entry registers whose equality
/// with the position selects one of `1 << regs.len()` rows.
#[derive(Clone, Debug)]
pub(crate) struct MemoPoint {
    pub(crate) base: u32,
    pub(crate) regs: Vec<u32>,
}

/// A compiled pattern.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub(crate) insts: Vec<Inst>,
    pub(crate) sets: Vec<SetData>,
    pub(crate) lits: Vec<u16>,
    pub(crate) refs: Vec<u32>,
    pub(crate) groups: usize,
    pub(crate) regs: usize,
    pub(crate) memo_points: Vec<MemoPoint>,
    pub(crate) memo_rows: usize,
}

/// Compiles a parsed tree.
pub(crate) fn compile(tree: &Tree, flags: Flags) -> Result<Program, Error> {
    let root = simplify(&tree.root);
    let mut c = Compiler {
        prog: Program {
            insts: Vec::new(),
            sets: Vec::new(),
            lits: Vec::new(),
            refs: Vec::new(),
            groups: tree.groups,
            regs: 0,
            memo_points: Vec::new(),
            memo_rows: 0,
        },
        unicode: flags.either_unicode(),
        memo_ok: !tree.has_backrefs,
        entry_regs: Vec::new(),
        counted: 0,
        set_ids: HashMap::new(),
    };
    c.node(&root, false)?;
    c.emit(Inst::Match)?;
    Ok(c.prog)
}

// ---------------------------------------------------------------------------------------
// Emission
// ---------------------------------------------------------------------------------------

struct Compiler {
    prog: Program,
    unicode: bool,
    /// False when the pattern has a backreference: then no state is memoized.
    memo_ok: bool,
    /// Entry registers of the enclosing empty-checked loops (innermost last), within the
    /// innermost lookaround.
    entry_regs: Vec<u32>,
    /// How many enclosing counted loops (with an iteration counter) there are, within the
    /// innermost lookaround.
    counted: usize,
    /// Sets already in the program, so that each is stored once.
    set_ids: HashMap<Vec<(u32, u32)>, u32>,
}

/// A piece of a sequence: a node, or a run of exact characters merged into a literal.
enum Piece<'a> {
    Node(&'a Node),
    Lit(Vec<u16>),
}

impl Compiler {
    fn pc(&self) -> u32 {
        self.prog.insts.len() as u32
    }

    fn emit(&mut self, i: Inst) -> Result<u32, Error> {
        if self.prog.insts.len() >= MAX_INSTRUCTIONS {
            return Err(Error::TooLarge(format!(
                "Invalid regular expression: the compiled program exceeds {MAX_INSTRUCTIONS} instructions"
            )));
        }
        self.prog.insts.push(i);
        Ok(self.pc() - 1)
    }

    fn patch(&mut self, at: u32, target: u32) {
        match &mut self.prog.insts[at as usize] {
            Inst::Split { y, .. } => *y = target,
            Inst::Jmp { to } => *to = target,
            Inst::CountHead { exit, .. } => *exit = target,
            Inst::LookStart { end, .. } => *end = target,
            _ => {}
        }
    }

    fn new_reg(&mut self) -> u32 {
        self.prog.regs += 1;
        self.prog.regs as u32 - 1
    }

    fn add_set(&mut self, s: &CharSet) -> u32 {
        if let Some(&i) = self.set_ids.get(s.ranges()) {
            return i;
        }
        self.prog.sets.push(SetData::new(s));
        let i = self.prog.sets.len() as u32 - 1;
        self.set_ids.insert(s.ranges().to_vec(), i);
        i
    }

    /// A memo id for a choice point emitted now, if memoizing it is sound (see the crate
    /// docs): no backreferences, not inside a counted loop, at most three enclosing
    /// empty-checked loops.
    fn memo_point(&mut self) -> u32 {
        if !self.memo_ok || self.counted > 0 || self.entry_regs.len() > MAX_MEMO_REGS {
            return NO_MEMO;
        }
        let base = self.prog.memo_rows as u32;
        self.prog.memo_rows += 1 << self.entry_regs.len();
        self.prog.memo_points.push(MemoPoint {
            base,
            regs: self.entry_regs.clone(),
        });
        self.prog.memo_points.len() as u32 - 1
    }

    fn node(&mut self, n: &Node, back: bool) -> Result<(), Error> {
        match n {
            Node::Empty => {}
            Node::Char(c) => {
                self.emit(Inst::Char { c: *c, back })?;
            }
            Node::Set(s) => {
                let set = self.add_set(s);
                self.emit(Inst::Set { set, back })?;
            }
            Node::Seq(items) => self.sequence(items, back)?,
            Node::Alt(alts) => self.alternation(alts, back)?,
            Node::Group(i, body) => {
                let (first, second) = if back {
                    (2 * i + 1, 2 * i)
                } else {
                    (2 * i, 2 * i + 1)
                };
                self.emit(Inst::Save { slot: first as u32 })?;
                self.node(body, back)?;
                self.emit(Inst::Save {
                    slot: second as u32,
                })?;
            }
            Node::Repeat {
                body,
                min,
                max,
                greedy,
            } => self.repeat(body, *min, max.unwrap_or(INF), *greedy, back)?,
            Node::Assert(kind) => {
                self.emit(Inst::Assert { kind: *kind })?;
            }
            Node::Look {
                body,
                behind,
                negative,
            } => {
                let start = self.emit(Inst::LookStart {
                    negative: *negative,
                    end: 0,
                })?;
                // The body's future ends at its LookEnd, so enclosing loops do not matter to
                // its memo keys.
                let saved = (
                    std::mem::take(&mut self.entry_regs),
                    std::mem::take(&mut self.counted),
                );
                self.node(body, *behind)?;
                (self.entry_regs, self.counted) = saved;
                self.emit(Inst::LookEnd)?;
                let end = self.pc();
                self.patch(start, end);
            }
            Node::BackRef { groups, icase } => {
                let start = self.prog.refs.len() as u32;
                self.prog.refs.extend(groups.iter().map(|&g| g as u32));
                self.emit(Inst::BackRef {
                    start,
                    len: groups.len() as u32,
                    icase: *icase,
                    back,
                })?;
            }
        }
        Ok(())
    }

    fn sequence(&mut self, items: &[Node], back: bool) -> Result<(), Error> {
        // Merge runs of exact characters (not surrogate code points in Unicode mode, which
        // must not match half of a pair) into literals.
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        let mut run: Vec<u16> = Vec::new();
        let mut run_nodes: Vec<&Node> = Vec::new();
        fn flush<'n>(pieces: &mut Vec<Piece<'n>>, run: &mut Vec<u16>, nodes: &mut Vec<&'n Node>) {
            if nodes.len() >= 2 {
                pieces.push(Piece::Lit(std::mem::take(run)));
            } else {
                pieces.extend(nodes.iter().map(|&n| Piece::Node(n)));
                run.clear();
            }
            nodes.clear();
        }
        for item in items {
            match item {
                Node::Char(c) if !(self.unicode && (0xD800..0xE000).contains(c)) => {
                    if let Some(ch) = char::from_u32(*c).filter(|_| self.unicode) {
                        let mut buf = [0u16; 2];
                        run.extend_from_slice(ch.encode_utf16(&mut buf));
                    } else {
                        run.push(*c as u16);
                    }
                    run_nodes.push(item);
                }
                other => {
                    flush(&mut pieces, &mut run, &mut run_nodes);
                    pieces.push(Piece::Node(other));
                }
            }
        }
        flush(&mut pieces, &mut run, &mut run_nodes);
        if back {
            pieces.reverse();
        }
        for p in pieces {
            match p {
                Piece::Node(n) => self.node(n, back)?,
                Piece::Lit(units) => {
                    let start = self.prog.lits.len() as u32;
                    self.prog.lits.extend_from_slice(&units);
                    self.emit(Inst::Lit {
                        start,
                        len: units.len() as u32,
                        back,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn alternation(&mut self, alts: &[Node], back: bool) -> Result<(), Error> {
        let mut jumps = Vec::new();
        for (k, alt) in alts.iter().enumerate() {
            if k + 1 == alts.len() {
                self.node(alt, back)?;
            } else {
                let memo = self.memo_point();
                let split = self.emit(Inst::Split { x: 0, y: 0, memo })?;
                let x = self.pc();
                if let Inst::Split { x: sx, .. } = &mut self.prog.insts[split as usize] {
                    *sx = x;
                }
                self.node(alt, back)?;
                jumps.push(self.emit(Inst::Jmp { to: 0 })?);
                let next = self.pc();
                self.patch(split, next);
            }
        }
        let end = self.pc();
        for j in jumps {
            self.patch(j, end);
        }
        Ok(())
    }

    /// A choice between iterating (at `body`) and leaving (at `exit`), in greedy or lazy order.
    fn choice(&mut self, greedy: bool, body: u32, exit: u32, memo: u32) -> Result<u32, Error> {
        let (x, y) = if greedy { (body, exit) } else { (exit, body) };
        self.emit(Inst::Split { x, y, memo })
    }

    fn set_choice_targets(&mut self, at: u32, greedy: bool, body: u32, exit: u32) {
        if let Inst::Split { x, y, .. } = &mut self.prog.insts[at as usize] {
            (*x, *y) = if greedy { (body, exit) } else { (exit, body) };
        }
    }

    /// One iteration's body: reset its captures, match, and (when it can match empty and
    /// `entry` is given) fail if it did. Compiled with `entry` as an enclosing register.
    fn iteration(&mut self, body: &Node, back: bool, entry: Option<u32>) -> Result<(), Error> {
        if let Some((lo, hi)) = group_slots(body) {
            self.emit(Inst::ResetCaps { lo, hi })?;
        }
        if let Some(r) = entry {
            self.entry_regs.push(r);
        }
        self.node(body, back)?;
        if let Some(r) = entry {
            self.entry_regs.pop();
            self.emit(Inst::CheckEmpty { reg: r })?;
        }
        Ok(())
    }

    fn repeat(
        &mut self,
        body: &Node,
        min: u64,
        max: u64,
        greedy: bool,
        back: bool,
    ) -> Result<(), Error> {
        let nullable = len_range(body).0 == 0;
        let single = match body {
            Node::Char(c) => Some(CharSet::single(*c)),
            Node::Set(s) => Some(s.clone()),
            _ => None,
        };
        if let Some(s) = single {
            let set = self.add_set(&s);
            let memo = if max == INF {
                self.memo_point()
            } else {
                NO_MEMO
            };
            self.emit(Inst::RepSet {
                set,
                min,
                max,
                greedy,
                back,
                memo,
            })?;
            return Ok(());
        }
        match (min, max) {
            (0, INF) => self.star(body, greedy, back, nullable),
            (1, INF) => self.plus(body, greedy, back, nullable),
            (0, 1) => self.optional(body, greedy, back, nullable, 1),
            _ => {
                let copies = if max == INF { min } else { max };
                let size = copies
                    .saturating_add(1)
                    .saturating_mul(estimate(body).saturating_add(6));
                if size <= EXPAND_LIMIT {
                    for _ in 0..min {
                        self.iteration(body, back, None)?;
                    }
                    if max == INF {
                        self.star(body, greedy, back, nullable)
                    } else {
                        self.optional(body, greedy, back, nullable, max - min)
                    }
                } else {
                    self.counted(body, min, max, greedy, back, nullable)
                }
            }
        }
    }

    /// `x*`: `L: Split(B, X) B: [SetEntry] x [CheckEmpty] Jmp L X:`.
    fn star(&mut self, body: &Node, greedy: bool, back: bool, nullable: bool) -> Result<(), Error> {
        let memo = self.memo_point();
        let split = self.choice(greedy, 0, 0, memo)?;
        let entry = if nullable { Some(self.new_reg()) } else { None };
        let b = self.pc();
        if let Some(r) = entry {
            self.emit(Inst::SetEntry { reg: r })?;
        }
        self.iteration(body, back, entry)?;
        self.emit(Inst::Jmp { to: split })?;
        let exit = self.pc();
        self.set_choice_targets(split, greedy, b, exit);
        Ok(())
    }

    /// `x+`: `[ClearEntry] B: x [CheckEmpty] Split(B', X) B': [SetEntry] Jmp B X:`.
    fn plus(&mut self, body: &Node, greedy: bool, back: bool, nullable: bool) -> Result<(), Error> {
        let entry = if nullable { Some(self.new_reg()) } else { None };
        if let Some(r) = entry {
            self.emit(Inst::ClearEntry { reg: r })?;
        }
        let b = self.pc();
        self.iteration(body, back, entry)?;
        let memo = self.memo_point();
        let split = self.choice(greedy, 0, 0, memo)?;
        let again = match entry {
            Some(r) => {
                let at = self.emit(Inst::SetEntry { reg: r })?;
                self.emit(Inst::Jmp { to: b })?;
                at
            }
            None => b,
        };
        let exit = self.pc();
        self.set_choice_targets(split, greedy, again, exit);
        Ok(())
    }

    /// `count` optional iterations in a row, all leaving to the same exit.
    fn optional(
        &mut self,
        body: &Node,
        greedy: bool,
        back: bool,
        nullable: bool,
        count: u64,
    ) -> Result<(), Error> {
        let entry = if nullable { Some(self.new_reg()) } else { None };
        let mut splits = Vec::new();
        for _ in 0..count {
            let memo = self.memo_point();
            let split = self.choice(greedy, 0, 0, memo)?;
            let b = self.pc();
            splits.push((split, b));
            if let Some(r) = entry {
                self.emit(Inst::SetEntry { reg: r })?;
            }
            self.iteration(body, back, entry)?;
        }
        let exit = self.pc();
        for (split, b) in splits {
            self.set_choice_targets(split, greedy, b, exit);
        }
        Ok(())
    }

    /// `x{min,max}` too large to expand: a loop with an iteration counter.
    fn counted(
        &mut self,
        body: &Node,
        min: u64,
        max: u64,
        greedy: bool,
        back: bool,
        nullable: bool,
    ) -> Result<(), Error> {
        let reg = self.new_reg();
        self.emit(Inst::CountInit { reg })?;
        let head = self.emit(Inst::CountHead {
            reg,
            min,
            max,
            greedy,
            exit: 0,
        })?;
        self.counted += 1;
        let entry = if nullable {
            let e = self.new_reg();
            self.emit(Inst::CountEnter { reg, entry: e, min })?;
            Some(e)
        } else {
            None
        };
        self.iteration(body, back, entry)?;
        self.counted -= 1;
        self.emit(Inst::CountIncr { reg, head })?;
        let exit = self.pc();
        self.patch(head, exit);
        Ok(())
    }
}
