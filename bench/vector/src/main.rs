//! Native runner of the vector index comparison; see bench/vector.sh.
//!
//!   lore-vector-bench compare clustered|uniform N [QUERIES] [lore,hnsw_rs,hnsw]
//!   lore-vector-bench threshold clustered|uniform [QUERIES]
//!   lore-vector-bench filters clustered|uniform N [QUERIES]

use lore_vector_bench::data::Distribution;
use lore_vector_bench::{Env, Only, compare, filters, threshold};

/// Times with this thread's CPU clock: the machine is shared, and time spent preempted by
/// other processes is not the index's.
struct Native;

impl Env for Native {
    fn now(&self) -> f64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid timespec to write into.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    }
    fn emit(&self, line: &str) {
        println!("{line}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let usage = "usage: lore-vector-bench compare|threshold|filters clustered|uniform [N] [QUERIES] [lore,hnsw_rs,hnsw]";
    let dist = match arg(1) {
        Some("clustered") => Distribution::Clustered,
        Some("uniform") => Distribution::Uniform,
        _ => panic!("{usage}"),
    };
    let number = |i: usize, default: usize| arg(i).map_or(default, |s| s.parse().expect(usage));
    let env = Native;
    match arg(0) {
        Some("compare") => {
            let which = arg(4).unwrap_or("lore,hnsw_rs,hnsw");
            let only = Only {
                lore: which.split(',').any(|w| w == "lore"),
                hnsw_rs: which.split(',').any(|w| w == "hnsw_rs"),
                rust_cv: which.split(',').any(|w| w == "hnsw"),
            };
            compare(&env, dist, number(2, 10_000), number(3, 1000), only);
        }
        Some("threshold") => threshold(&env, dist, number(2, 300)),
        Some("filters") => filters(&env, dist, number(2, 100_000), number(3, 200)),
        _ => panic!("{usage}"),
    }
}
