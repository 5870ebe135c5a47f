//! Memo soundness: with the memo on from the first step, every result equals the result
//! without a memo, over many generated patterns and inputs.

use super::exec_with;
use crate::budget::{Budget, Stopped};
use crate::flags::Flags;
use crate::{compile, parse};

/// A budget of 200,000 steps (unmemoized runs of nested loops can be exponential).
struct Cap(u64);

impl Budget for Cap {
    fn spend(&mut self, steps: u64) -> Result<(), Stopped> {
        self.0 += steps;
        if self.0 > 200_000 {
            Err(Stopped)
        } else {
            Ok(())
        }
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn atom(r: &mut Rng, depth: u32) -> String {
    const LEAVES: &[&str] = &[
        "a", "b", ".", "[ab]", "\\w", "^", "$", "\\b", "a*", "b+", "a?",
    ];
    if depth == 0 {
        return LEAVES[r.below(LEAVES.len() as u64) as usize].to_string();
    }
    let inner = alt(r, depth - 1);
    match r.below(12) {
        0 => format!("({inner})"),
        1 => format!("(?:{inner})*"),
        2 => format!("(?:{inner})+"),
        3 => format!("({inner})?"),
        4 => format!("(?:{inner}){{1,3}}"),
        5 => format!("({inner})*?"),
        6 => format!("(?={inner})"),
        7 => format!("(?!{inner})"),
        8 => format!("(?<={inner})"),
        9 => format!("(?<!{inner})"),
        10 => format!("(?:{inner}|)+"),
        _ => LEAVES[r.below(LEAVES.len() as u64) as usize].to_string(),
    }
}

fn alt(r: &mut Rng, depth: u32) -> String {
    let mut s = String::new();
    for k in 0..1 + r.below(2) {
        if k > 0 {
            s.push('|');
        }
        for _ in 0..1 + r.below(3) {
            s.push_str(&atom(r, depth));
        }
    }
    s
}

#[test]
fn memo_never_changes_a_result() {
    let mut r = Rng(0x2545_F491_4F6C_DD1D);
    let mut compared = 0;
    for _ in 0..3_000 {
        let pattern = alt(&mut r, 3);
        let flags_text = ["", "i", "m", "u", "y"][r.below(5) as usize];
        let flags = Flags::parse(flags_text).unwrap();
        let units: Vec<u16> = pattern.encode_utf16().collect();
        let Ok(tree) = parse::parse(&units, flags_text, flags) else {
            continue;
        };
        let Ok(prog) = compile::compile(&tree, flags) else {
            continue;
        };
        for _ in 0..4 {
            let input: Vec<u16> = (0..r.below(12))
                .map(|_| [0x61, 0x62, 0x20][r.below(3) as usize])
                .collect();
            let start = r.below(input.len() as u64 + 1) as usize;
            let Ok(plain) = exec_with(&prog, flags, &input, start, &mut Cap(0), None) else {
                continue;
            };
            let memo = exec_with(&prog, flags, &input, start, &mut Cap(0), Some(0));
            assert_eq!(
                Ok(plain),
                memo,
                "/{pattern}/{flags_text} on {input:?} from {start}"
            );
            compared += 1;
        }
    }
    assert!(compared > 10_000);
}
