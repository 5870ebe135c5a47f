//! The wasm32 entry point: node (V8, as on Workers) instantiates the module with a clock and
//! an output function (bench/vector_wasm.mjs) and calls `run`.

use crate::data::Distribution;
use crate::{Env, Only, compare, filters, threshold};

/// Randomness for the bare module: a fixed xorshift sequence (the bench seeds its own data; this
/// only answers the libraries that ask getrandom).
fn fixed_random(buf: &mut [u8]) -> Result<(), getrandom::Error> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    for b in buf {
        let mut x = STATE.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        STATE.store(x, Ordering::Relaxed);
        *b = x as u8;
    }
    Ok(())
}
getrandom::register_custom_getrandom!(fixed_random);

#[link(wasm_import_module = "bench")]
unsafe extern "C" {
    /// Milliseconds of CPU time (`process.cpuUsage()`).
    fn now_ms() -> f64;
    fn emit(ptr: *const u8, len: usize);
}

struct Host;

impl Env for Host {
    fn now(&self) -> f64 {
        unsafe { now_ms() / 1e3 }
    }
    fn emit(&self, line: &str) {
        unsafe { emit(line.as_ptr(), line.len()) }
    }
}

/// `suite`: 0 compare, 1 threshold, 2 filters; `dist`: 0 clustered, 1 uniform; `rust_cv`: 0
/// leaves rust-cv hnsw out of a comparison.
#[unsafe(no_mangle)]
pub extern "C" fn run(suite: u32, dist: u32, n: u32, queries: u32, rust_cv: u32) {
    let dist = if dist == 0 {
        Distribution::Clustered
    } else {
        Distribution::Uniform
    };
    let (n, queries) = (n as usize, queries as usize);
    let only = Only {
        lore: true,
        hnsw_rs: false,
        rust_cv: rust_cv != 0,
    };
    match suite {
        0 => compare(&Host, dist, n, queries, only),
        1 => threshold(&Host, dist, queries),
        _ => filters(&Host, dist, n, queries),
    }
}
