//! Shared helpers for the integration tests: budgets, and running both this crate and
//! `regress` (driven the way Boa drives it) on one case.
#![allow(dead_code)]

use lore_jsregex::{Budget, Regex, Stopped};

/// Match slots: `None` for no match.
pub type Slots = Option<Vec<Option<(usize, usize)>>>;

/// A budget that never stops and counts what it was charged.
#[derive(Default)]
pub struct Count {
    pub steps: u64,
    pub calls: u64,
}

impl Budget for Count {
    fn spend(&mut self, steps: u64) -> Result<(), Stopped> {
        self.steps += steps;
        self.calls += 1;
        Ok(())
    }
}

/// A budget of `left` steps.
pub struct Limit {
    pub left: u64,
    pub spent: u64,
}

impl Limit {
    pub fn new(left: u64) -> Limit {
        Limit { left, spent: 0 }
    }
}

impl Budget for Limit {
    fn spend(&mut self, steps: u64) -> Result<(), Stopped> {
        self.spent += steps;
        if steps > self.left {
            self.left = 0;
            return Err(Stopped);
        }
        self.left -= steps;
        Ok(())
    }
}

pub fn utf16(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

/// UTF-16 of `s`, where `~XXXX` (four hex digits) stands for the code unit U+XXXX.
pub fn units(s: &str) -> Vec<u16> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('~') {
        out.extend(rest[..i].encode_utf16());
        let hex = &rest[i + 1..i + 5];
        out.push(u16::from_str_radix(hex, 16).expect("four hex digits after ~"));
        rest = &rest[i + 5..];
    }
    out.extend(rest.encode_utf16());
    out
}

/// Runs this crate; `Err` is the compile error's message.
pub fn ours(pattern: &str, flags: &str, input: &[u16], start: usize) -> Result<Slots, String> {
    let re = Regex::new(&utf16(pattern), flags).map_err(|e| e.to_string())?;
    let mut b = Count::default();
    let m = re
        .exec(input, start, &mut b)
        .expect("an unlimited budget never stops");
    Ok(m.map(|c| c.slots))
}

/// Why regress gave no answer.
#[derive(Debug)]
pub enum NoAnswer {
    /// It panicked (regress 0.12 has a few assertion failures, e.g. on some lookbehinds).
    Panicked,
    /// It ran past the deadline (it has no step limit and loops on some nested quantifiers).
    TimedOut,
}

/// Runs [`theirs`] on a worker thread, giving up after `deadline` (the thread is left to
/// finish on its own). Panics raised in regress's own source are not printed.
// A native test helper: the project's ban on threads is for code that runs at the edge.
#[allow(clippy::disallowed_methods)]
pub fn theirs_guarded(
    pattern: &str,
    flags: &str,
    input: &[u16],
    start: usize,
    deadline: std::time::Duration,
) -> Result<Result<Slots, String>, NoAnswer> {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info
                .location()
                .is_some_and(|l| l.file().contains("regress-"))
            {
                default(info);
            }
        }));
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let (p, f, i) = (pattern.to_string(), flags.to_string(), input.to_vec());
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(|| theirs(&p, &f, &i, start));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(deadline) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(_)) => Err(NoAnswer::Panicked),
        Err(_) => Err(NoAnswer::TimedOut),
    }
}

/// Runs regress as Boa's RegExpBuiltinExec does (code points in u/v mode, code units
/// otherwise; sticky emulated by rejecting a match that does not start at `start`).
pub fn theirs(pattern: &str, flags: &str, input: &[u16], start: usize) -> Result<Slots, String> {
    let unicode = flags.contains('u') || flags.contains('v');
    let f = regress::Flags::from(flags);
    let re = if unicode {
        regress::Regex::from_unicode(pattern.chars().map(u32::from), f)
    } else {
        regress::Regex::from_unicode(pattern.encode_utf16().map(u32::from), f)
    }
    .map_err(|e| e.text)?;
    if start > input.len() {
        return Ok(None);
    }
    let m = if unicode {
        re.find_from_utf16(input, start).next()
    } else {
        re.find_from_ucs2(input, start).next()
    };
    let Some(m) = m else { return Ok(None) };
    if flags.contains('y') && m.start() != start {
        return Ok(None);
    }
    let mut slots = vec![Some((m.start(), m.end()))];
    slots.extend(
        m.captures
            .iter()
            .map(|c| c.as_ref().map(|r| (r.start, r.end))),
    );
    Ok(Some(slots))
}
