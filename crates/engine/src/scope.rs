//! A running script's scope, as the engine instance its SDK calls go through carries it: the
//! run's host (whose SDK calls, output and deadline a nested script operation draws on), the
//! events the run's writes saved (they set off behaviors once the run commits), and why the
//! run may only read.

use std::cell::RefCell;
use std::rc::Rc;

use lore_sandbox::caps::ScriptCaps;
use lore_sandbox::host::Host;
use lore_sandbox::remote;

use lore_memory::event::Event;

/// What a running script shares with what it calls.
pub struct Scope {
    /// Where the run's host is, for the script operations it calls.
    pub host: HostRef,
    /// The run's caps and start: a nested run shares its SDK calls, output and deadline.
    pub caps: ScriptCaps,
    pub started_ms: i64,
    pub events: RefCell<Vec<Event>>,
    /// Script operations deep: 0 for the tool's (or reaction's) own script.
    pub nesting: u8,
    /// Why this run may only read, in words for the refusal of a write (`None`: it may write).
    pub read_only: Option<String>,
}

/// Where a run's host lives: on this thread, or on its script thread (natively).
#[derive(Clone)]
pub enum HostRef {
    Inline(Rc<Host>),
    Remote {
        thread: Rc<dyn remote::ScriptThread>,
        key: u64,
    },
}

impl Scope {
    /// When the run (and every run nested in it) must end.
    pub fn deadline_ms(&self) -> i64 {
        self.started_ms + self.caps.wall_ms as i64
    }
}
