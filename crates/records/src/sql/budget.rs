//! The row and time budget of one query's loading: every table read charges its rows, and
//! every charge reads the clock.

use std::rc::Rc;

use lore_base::error::{LoreError, Result};
use lore_base::ports::Clock;

/// What loading has read so far, against the budget.
pub struct Budget {
    clock: Rc<dyn Clock>,
    deadline_ms: i64,
    max_rows: usize,
    loaded: usize,
}

impl Budget {
    pub fn new(clock: Rc<dyn Clock>, deadline_ms: i64, max_rows: usize) -> Self {
        Self {
            clock,
            deadline_ms,
            max_rows,
            loaded: 0,
        }
    }

    /// Charges `n` more rows read for `table`; fails past the row or time budget.
    pub fn charge(&mut self, table: &str, n: usize) -> Result<()> {
        self.loaded += n;
        if self.loaded > self.max_rows {
            return Err(LoreError::invalid(
                "sql",
                format!(
                    "the query reads more than {} rows (reached while reading {table}); the tables a query names are read whole (entities only narrowed by a WHERE type = '...' or type IN (...)), so query fewer or smaller tables (a typed table instead of entities, events instead of event_history)",
                    self.max_rows
                ),
            ));
        }
        if self.clock.now_ms() > self.deadline_ms {
            return Err(time_exceeded(self.deadline_ms, table));
        }
        Ok(())
    }
}

pub(super) fn time_exceeded(_deadline: i64, while_doing: &str) -> LoreError {
    LoreError::invalid(
        "sql",
        format!(
            "the query ran past its time budget (while {while_doing}); narrow it (fewer tables or joins, a WHERE on the joined tables)"
        ),
    )
}
