//! Hostile patterns: every search either completes within a step count linear in the input
//! (times the pattern's size) or is stopped by a budget of 5,000,000 steps.

mod common;

use common::{Count, Limit, utf16};
use lore_jsregex::{Budget, Regex, Stopped};

const BUDGET: u64 = 5_000_000;

/// (pattern, flags, input builder, whether the memo makes it linear).
type Hostile = (&'static str, &'static str, fn(usize) -> String, bool);

fn a_bang(n: usize) -> String {
    "a".repeat(n) + "!"
}
fn a_only(n: usize) -> String {
    "a".repeat(n)
}
fn spaces_x(n: usize) -> String {
    " ".repeat(n) + "x"
}
fn words_bang(n: usize) -> String {
    "ab ".repeat(n / 3) + "!"
}
fn x_only(n: usize) -> String {
    "x".repeat(n)
}
fn a_b(n: usize) -> String {
    "a".repeat(n) + "b"
}

const HOSTILE: &[Hostile] = &[
    ("(a+)+$", "", a_bang, true),
    ("(a|aa)+$", "", a_bang, true),
    ("(a|a)*b", "", a_only, true),
    ("a*a*a*a*a*a*b", "", a_only, true),
    ("(\\s*)+$", "", spaces_x, true),
    ("^(\\w+\\s?)*$", "", words_bang, true),
    ("(x+x+)+y", "", x_only, true),
    ("(.*){1,32000}[bc]", "", a_only, false),
    ("(?=(a+))*b", "", a_only, true),
    ("(?=(a+))+b", "", a_only, false),
    ("(a*)*\\1b", "", a_only, false),
    ("^(?:a|a?)+$", "", a_b, true),
    ("(?<=a*)b", "", a_only, true),
    ("(?=.*x)", "", a_only, true),
    ("(?=.*x)", "u", a_only, true),
    ("(?!.*a$).", "", a_only, false),
    ("(?:a+)+$", "i", a_bang, true),
    ("(a+)+$", "u", a_bang, true),
    ("(?<=(a+)+)b", "", a_only, false),
    ("^(([a-z])+.)+[A-Z]([a-z])+$", "", a_bang, true),
    ("(\\w+)*@", "", a_only, true),
    ("(?:\\1a|b)*c", "", a_only, false),
];

#[test]
fn hostile_patterns_are_bounded() {
    let stats = std::env::var_os("JSREGEX_STATS").is_some();
    for &(pattern, flags, make, linear) in HOSTILE {
        let re = Regex::new(&utf16(pattern), flags).expect("hostile patterns compile");
        for n in [10_000, 100_000, 1_000_000] {
            let input = utf16(&make(n));
            let mut budget = Limit::new(BUDGET);
            let result = re.exec(&input, 0, &mut budget);
            if stats {
                eprintln!(
                    "/{pattern}/{flags} n={n}: {:?} after {} steps",
                    result.as_ref().map(|m| m.is_some()),
                    budget.spent
                );
            }
            match result {
                Ok(_) => {
                    let bound = 40 * pattern.len() as u64 * (input.len() as u64 + 1);
                    assert!(
                        budget.spent <= bound,
                        "/{pattern}/ on {n}: {} steps > {bound}",
                        budget.spent
                    );
                }
                Err(Stopped) => {
                    assert!(
                        budget.spent <= BUDGET + 1024,
                        "/{pattern}/ on {n}: stopped late, {}",
                        budget.spent
                    );
                    assert!(
                        !(linear && n <= 10_000),
                        "/{pattern}/ on {n} should be linear but was stopped"
                    );
                }
            }
        }
        if linear {
            // Ten times the input, at most about ten times the steps.
            let steps = |n: usize| {
                let mut c = Count::default();
                re.exec(&utf16(&make(n)), 0, &mut c).expect("unlimited");
                c.steps
            };
            let (small, large) = (steps(10_000), steps(100_000));
            assert!(
                large <= 11 * small,
                "/{pattern}/{flags}: {small} steps on 10,000, {large} on 100,000"
            );
        }
    }
}

#[test]
fn a_budget_stops_exponential_search_at_once() {
    let input = utf16(&a_bang(30));
    // With the memo, (a+)+$ is linear; without it (a backreference turns it off) it is
    // exponential. Either way a budget of N steps ends the search within N + 1,024 steps.
    for pattern in ["(a+)+$", "(a+)+$|\\1"] {
        let re = Regex::new(&utf16(pattern), "").unwrap();
        for n in [100u64, 10_000, 1_000_000] {
            let mut budget = Limit::new(n);
            let r = re.exec(&input, 0, &mut budget);
            assert!(
                budget.spent <= n + 1024,
                "/{pattern}/ with {n}: {} steps",
                budget.spent
            );
            if pattern.contains('\\') {
                assert_eq!(r, Err(Stopped), "/{pattern}/ with {n}");
            }
        }
    }
    let re = Regex::new(&utf16("(a+)+$"), "").unwrap();
    let mut count = Count::default();
    assert_eq!(re.exec(&input, 0, &mut count), Ok(None));
    assert!(
        count.steps < 10_000,
        "memoized (a+)+$ took {} steps",
        count.steps
    );
}

/// A budget that checks the reporting contract: at most 1,024 steps a call.
struct Strict {
    total: u64,
}

impl Budget for Strict {
    fn spend(&mut self, steps: u64) -> Result<(), Stopped> {
        assert!(steps <= 1024, "reported {steps} steps at once");
        self.total += steps;
        Ok(())
    }
}

#[test]
fn steps_are_reported_at_least_every_1024() {
    let long = "ab".repeat(500);
    let input = utf16(&format!("{long}{long}"));
    for (pattern, flags) in [
        ("(a+)+$|\\1", ""),
        ("^(.*)\\1$", ""),
        ("^(.*)\\1$", "iu"),
        ("(?=(.*))\\1x", ""),
        (&*long, ""),
        ("(?<=(b|a)*)x", ""),
    ] {
        let re = Regex::new(&utf16(pattern), flags).unwrap();
        let mut b = Strict { total: 0 };
        let mut c = Count::default();
        let r1 = re.exec(&input, 0, &mut b);
        let r2 = re.exec(&input, 0, &mut c);
        assert_eq!(r1, r2);
        assert_eq!(b.total, c.steps);
        assert!(c.calls >= 1);
    }
}
