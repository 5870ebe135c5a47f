//! The limits every script run has (SPEC 4.1) and the structured error a run ends with when it
//! reaches one. Each error names its cap and the limit, so an agent knows what to change.

use serde::{Deserialize, Serialize};

/// The limits of one script run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptCaps {
    /// Returned value plus logs, serialized.
    pub output_bytes: usize,
    /// SDK calls per run.
    pub sdk_calls: usize,
    /// Wall clock of the whole run, host clock.
    pub wall_ms: u64,
    /// One `ctx.sleep()`.
    pub sleep_ms: u64,
    /// Interpreter steps (bytecode instructions), plus the steps of the run's regular
    /// expression matching: the deterministic CPU budget.
    pub steps: u64,
    /// Nested calls (JavaScript frames plus host re-entries).
    pub recursion: usize,
    /// Values on the interpreter's stack.
    pub value_stack: usize,
    /// Promise jobs (microtasks) per run.
    pub jobs: u64,
    /// Source text of the script.
    pub source_bytes: usize,
    /// Bracket nesting of the source, checked before any parser sees it.
    pub nesting: usize,
    /// Length of one string a built-in may create (`repeat`, `padStart`, `join`, ...).
    pub string_chars: usize,
    /// Length of one array a built-in may create (`new Array(n)`, `fill`, `Array.from`).
    pub array_len: usize,
    /// Nesting of a value crossing the bridge or serialized (`JSON.stringify`, results).
    pub value_depth: usize,
    /// Buffered writes (storage keys) a run may commit in its one batch.
    pub buffered_writes: usize,
    /// Heap the scripts running on one thread may hold at once (see `sandbox::meter`).
    pub memory_bytes: usize,
}

impl Default for ScriptCaps {
    fn default() -> Self {
        Self {
            output_bytes: 1_000_000,
            sdk_calls: 200,
            wall_ms: 180_000,
            sleep_ms: 30_000,
            steps: 20_000_000,
            recursion: 256,
            value_stack: 64 * 1024,
            jobs: 100_000,
            source_bytes: 256 * 1024,
            nesting: 128,
            string_chars: 8 << 20,
            array_len: 1 << 20,
            value_depth: 64,
            buffered_writes: 20_000,
            // A Workers isolate has 128 MB for everything (the module, its caches, V8's own
            // heap), and its wasm memory never shrinks: scripts get half what they get natively.
            memory_bytes: if cfg!(target_family = "wasm") {
                32 << 20
            } else {
                64 << 20
            },
        }
    }
}

/// How much of its caps a run used, for its Action: the interpreter steps (with its regular
/// expressions' steps), the most memory the thread's scripts held at one of the run's
/// checkpoints, its SDK calls and its output (returned value and logs, serialized).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Used {
    pub steps: u64,
    pub memory_bytes: u64,
    pub sdk_calls: u64,
    pub output_bytes: u64,
}

/// Which cap a run reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cap {
    Output,
    SdkCalls,
    WallClock,
    Sleep,
    Steps,
    Recursion,
    Jobs,
    SourceSize,
    Nesting,
    StringLength,
    ArrayLength,
    ValueDepth,
    BufferedWrites,
    NeverSettles,
    Memory,
}

impl Cap {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Output => "output",
            Self::SdkCalls => "sdk_calls",
            Self::WallClock => "wall_clock",
            Self::Sleep => "sleep",
            Self::Steps => "steps",
            Self::Recursion => "recursion",
            Self::Jobs => "jobs",
            Self::SourceSize => "source_size",
            Self::Nesting => "nesting",
            Self::StringLength => "string_length",
            Self::ArrayLength => "array_length",
            Self::ValueDepth => "value_depth",
            Self::BufferedWrites => "buffered_writes",
            Self::NeverSettles => "never_settles",
            Self::Memory => "memory",
        }
    }

    /// The limit of this cap under `caps`, as shown to the caller.
    pub fn limit(self, caps: &ScriptCaps) -> u64 {
        match self {
            Self::Output => caps.output_bytes as u64,
            Self::SdkCalls => caps.sdk_calls as u64,
            Self::WallClock => caps.wall_ms,
            Self::Sleep => caps.sleep_ms,
            Self::Steps => caps.steps,
            Self::Recursion => caps.recursion as u64,
            Self::Jobs => caps.jobs,
            Self::SourceSize => caps.source_bytes as u64,
            Self::Nesting => caps.nesting as u64,
            Self::StringLength => caps.string_chars as u64,
            Self::ArrayLength => caps.array_len as u64,
            Self::ValueDepth => caps.value_depth as u64,
            Self::BufferedWrites => caps.buffered_writes as u64,
            Self::NeverSettles => 0,
            Self::Memory => caps.memory_bytes as u64,
        }
    }

    /// The cap with its limit, for messages: "the steps cap (20000000 interpreter steps)", or
    /// just "the never_settles cap" for a cap that has no amount.
    pub fn named(self, caps: &ScriptCaps) -> String {
        match self.unit() {
            "" => format!("the {} cap", self.as_str()),
            unit => format!("the {} cap ({} {unit})", self.as_str(), self.limit(caps)),
        }
    }

    /// What the limit counts, for messages.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Output | Self::SourceSize | Self::Memory => "bytes",
            Self::SdkCalls => "SDK calls",
            Self::WallClock | Self::Sleep => "ms",
            Self::Steps => "interpreter steps",
            Self::Recursion => "nested calls",
            Self::Jobs => "promise jobs",
            Self::Nesting | Self::ValueDepth => "levels",
            Self::StringLength => "characters",
            Self::ArrayLength => "elements",
            Self::BufferedWrites => "writes",
            Self::NeverSettles => "",
        }
    }

    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            Self::Output => "return less data (select fields, page through results)",
            Self::SdkCalls => "batch work (create_many, list with a filter) or split the script",
            Self::WallClock => "split the work into shorter scripts",
            Self::Sleep => "sleep less per call; poll in a loop within the wall clock",
            Self::Steps => {
                "the script computes too much (its regular expressions' matching counts too); loop less, match simpler patterns on shorter text, or move work into SDK filters"
            }
            Self::Recursion => "recurse less deeply",
            Self::Jobs => {
                "the script schedules too many promise jobs (an endless then/await chain?)"
            }
            Self::SourceSize => "send a shorter script",
            Self::Nesting => "nest brackets less deeply",
            Self::StringLength => "build smaller strings",
            Self::ArrayLength => "build smaller arrays",
            Self::ValueDepth => "pass and return flatter values",
            Self::BufferedWrites => "write less in one run; split it",
            Self::NeverSettles => {
                "the script awaits a promise nothing will ever settle; resolve it or do not await it"
            }
            Self::Memory => {
                "the script holds too much data at once; keep fewer or smaller values, page through results"
            }
        }
    }
}
