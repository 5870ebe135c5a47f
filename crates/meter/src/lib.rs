//! lore's memory meter for scripts: a global-allocator wrapper that counts the bytes scripts hold on a
//! thread.
//!
//! Boa has no allocation limit of its own. A run's realm, values and buffers all live on the
//! thread that runs it (a `Context` cannot move between threads), and the engine's garbage
//! collector is per thread too. So the runner marks the stretches in which it executes script
//! code (a [`Section`]: evaluating, running promise jobs, settling SDK calls, dropping the
//! realm) and the wrapper adds up what is allocated and freed inside them. That sum is the
//! memory the thread's scripts hold. Host work between sections (storage reads, other requests
//! served by the same thread while a script awaits) is not counted.
//!
//! Scripts that run at once on one thread (a native worker serves many connections; so does a
//! Workers isolate) share the thread's budget, because the collector frees one run's garbage
//! while another runs. The run that crosses the cap ends with the `memory` cap's error. When no
//! run is active the sum restarts at zero, so nothing drifts; what the ended runs still held
//! (their realms' objects, until the collector frees them) is kept apart
//! ([`left_for_collector`]), so the runner collects only when that has grown.
//!
//! The runner checks the sum against the cap at every host boundary: each SDK call, promise
//! job, guarded built-in, and the tick the TypeScript strip puts at the top of every loop body
//! and function body.
//!
//! A process that only runs scripts (natively, each run's process: `src/scripts.rs`) also
//! counts every byte it holds, whatever allocates it, and has a hard limit ([`hard_limit`]):
//! an allocation past it ends the process at once (`abort`), so no built-in, native loop or
//! engine path can take more than that, checkpoint or not. The process that started it sees
//! the abort and reports the memory cap.
//!
//! Every binary that runs scripts installs the wrapper around its allocator:
//! `#[global_allocator] static A: Metered<System> = Metered(System);`. Without it the meter
//! reads zero ([`installed`] says so) and only the other caps bound a run. Per allocation it
//! reads one thread-local flag, and writes two thread-local integers inside a section.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// Whether this process counts every byte it holds ([`count_process`]).
static COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated minus bytes freed since counting began.
static HELD: AtomicIsize = AtomicIsize::new(0);
/// The most the process may hold (0: no limit).
static HARD: AtomicUsize = AtomicUsize::new(0);

/// Counts, process-wide, an allocation of `delta` bytes (a free when negative); past the hard
/// limit the process ends here, before the allocation is made.
#[inline]
fn count(delta: isize) {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    let held = HELD.fetch_add(delta, Ordering::Relaxed).wrapping_add(delta);
    let hard = HARD.load(Ordering::Relaxed);
    if delta > 0 && hard != 0 && held > 0 && held as usize > hard {
        // Nothing may unwind out of an allocator, and nothing here may allocate.
        std::process::abort();
    }
}

/// From now on, counts every byte this process holds (for [`hard_limit`] and [`held`]). For
/// processes that run scripts only: it costs an atomic add per allocation.
pub fn count_process() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// The bytes this process holds since [`count_process`].
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed).max(0) as usize
}

/// Ends the process at once if it ever holds more than `bytes` (`None`: no limit). Needs
/// [`count_process`].
pub fn hard_limit(bytes: Option<usize>) {
    HARD.store(bytes.unwrap_or(0), Ordering::Relaxed);
}

thread_local! {
    /// Whether this thread is executing script code.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Bytes allocated minus bytes freed inside sections since the thread's runs last all ended.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// Runs started on this thread and not yet ended.
    static RUNS: Cell<usize> = const { Cell::new(0) };
    /// Bytes the runs that ended since the runner last collected garbage still held when they
    /// ended (their realms' objects, freed only by a collection).
    static LEFT: Cell<usize> = const { Cell::new(0) };
}

/// Wraps an allocator and meters the threads that run scripts.
pub struct Metered<A>(pub A);

#[inline]
fn add(delta: isize) {
    // `try_with`: allocations during thread teardown, after the locals are gone, are not metered.
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = LIVE.try_with(|live| live.set(live.get().wrapping_add(delta)));
    }
}

// SAFETY: every method delegates to the wrapped allocator with the caller's arguments unchanged;
// the bookkeeping touches only const-initialized thread locals, which never allocate.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Metered<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller upholds `alloc`'s contract, passed through as is.
        let p = unsafe { self.0.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: as for `alloc`.
        let p = unsafe { self.0.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { self.0.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: as for `alloc`.
        let p = unsafe { self.0.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// One script run on this thread, from its start to its end.
pub struct Run {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Run {
    pub fn begin() -> Self {
        RUNS.with(|r| {
            if r.get() == 0 {
                LIVE.with(|l| l.set(0));
            }
            r.set(r.get() + 1);
        });
        Self {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        RUNS.with(|r| {
            r.set(r.get().saturating_sub(1));
            if r.get() == 0 {
                let held = LIVE.with(|l| l.replace(0)).max(0) as usize;
                LEFT.with(|left| left.set(left.get().saturating_add(held)));
            }
        });
    }
}

/// Bytes that runs ended since the last [`collected`] left for the garbage collector (an upper
/// bound: the engine may have collected some of it on its own since).
pub fn left_for_collector() -> usize {
    LEFT.with(Cell::get)
}

/// Notes that the runner collected this thread's garbage.
pub fn collected() {
    LEFT.with(|left| left.set(0));
}

/// A stretch of script execution: allocations inside it are metered. Never held across an
/// `.await`, where other work on the thread runs.
pub struct Section {
    was_on: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Section {
    pub fn enter() -> Self {
        Self {
            was_on: ON.with(|on| on.replace(true)),
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        ON.with(|on| on.set(self.was_on));
    }
}

/// Runs `make` as if it were script code and returns what it made with the bytes it left
/// allocated, without counting them for the thread's runs: for a realm made before the run
/// that takes it, which then [`charge`]s them.
pub fn measured<T>(make: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.with(|l| l.replace(0));
    let section = Section::enter();
    let made = make();
    drop(section);
    let bytes = LIVE.with(|l| l.replace(before)).max(0) as usize;
    (made, bytes)
}

/// Counts `bytes` for the thread's runs, as if the run that began last had allocated them (a
/// realm [`measured`] before it).
pub fn charge(bytes: usize) {
    LIVE.with(|l| l.set(l.get().saturating_add(bytes as isize)));
}

/// Runs going on on this thread.
pub fn runs() -> usize {
    RUNS.with(Cell::get)
}

/// Bytes the thread's scripts hold now (never negative).
pub fn live() -> usize {
    LIVE.with(|l| l.get().max(0) as usize)
}

/// Whether the global allocator is [`Metered`]: a section sees its own allocation.
pub fn installed() -> bool {
    let before = LIVE.with(Cell::get);
    let on = Section::enter();
    let probe = std::hint::black_box(vec![0u8; 64]);
    let after = LIVE.with(Cell::get);
    drop(probe);
    drop(on);
    LIVE.with(|l| l.set(before));
    after != before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_wrapper_the_meter_reads_zero() {
        // Unit tests run under the default allocator.
        assert!(!installed());
        let _run = Run::begin();
        let _section = Section::enter();
        let v = vec![0u8; 1 << 20];
        assert_eq!(live(), 0);
        drop(v);
    }
}
