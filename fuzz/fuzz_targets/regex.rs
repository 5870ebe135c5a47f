//! `lore-jsregex` on any pattern, flags and input: compiling ends in a regex or a structured
//! error, and a search ends in a match, no match, or the budget's stop, having spent no more
//! than the budget allowed (plus the one report it may overshoot by). A panic, an abort, a
//! hang or a budget overrun is a finding; so is a match whose slots do not lie within the input.
//!
//! Input: byte 0 picks the flags (bits: g i m s u y d; bit 7 swaps u for v), byte 1 the start
//! index modulo the input's length + 1, then the pattern and the input as UTF-8 split on U+001E.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// Steps a search may spend.
const BUDGET: u64 = 200_000;

struct Counted {
    spent: u64,
}

impl lore_jsregex::Budget for Counted {
    fn spend(&mut self, steps: u64) -> Result<(), lore_jsregex::Stopped> {
        self.spent += steps;
        if self.spent > BUDGET {
            return Err(lore_jsregex::Stopped);
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (bits, start) = (data[0], data[1]);
    let text = String::from_utf8_lossy(&data[2..]);
    let (pattern, input) = text.split_once('\u{1e}').unwrap_or((&text, ""));
    let mut flags = String::new();
    for (bit, flag) in [
        (0, 'g'),
        (1, 'i'),
        (2, 'm'),
        (3, 's'),
        (4, 'u'),
        (5, 'y'),
        (6, 'd'),
    ] {
        if bits & (1 << bit) != 0 {
            flags.push(if flag == 'u' && bits & 0x80 != 0 {
                'v'
            } else {
                flag
            });
        }
    }
    let pattern: Vec<u16> = pattern.encode_utf16().collect();
    let input: Vec<u16> = input.encode_utf16().collect();
    let Ok(re) = lore_jsregex::Regex::new(&pattern, &flags) else {
        return;
    };
    let start = usize::from(start) % (input.len() + 1);
    let mut budget = Counted { spent: 0 };
    if let Ok(Some(found)) = re.exec(&input, start, &mut budget) {
        assert_eq!(found.slots.len(), re.group_count() + 1);
        for (a, b) in found.slots.iter().flatten() {
            assert!(
                a <= b && *b <= input.len(),
                "slot {a}..{b} in {} units",
                input.len()
            );
        }
    }
    assert!(
        budget.spent <= BUDGET + 1_024,
        "spent {} of {BUDGET}",
        budget.spent
    );
});
