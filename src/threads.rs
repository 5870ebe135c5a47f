//! The threads `lore serve` computes on besides its workers, so that no tenant's computing
//! holds the requests of a worker thread: each SQL query's computing (the `Offload` port) runs
//! on a thread of its own. A query that computes for seconds then takes a core's share from the
//! scheduler, as any thread does, instead of holding every request of its worker. (Scripts run
//! in processes of their own: `crate::scripts`.)

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use tokio::sync::oneshot;

use crate::ports::SystemClock;
use lore_base::ports::{Clock, Offload};

/// Runs each offloaded job (an SQL query's computing) on a thread of its own.
pub struct ThreadPerJob;

impl Offload for ThreadPerJob {
    fn run(&self, job: Box<dyn FnOnce(Rc<dyn Clock>) + Send>) -> Pin<Box<dyn Future<Output = ()>>> {
        let (done, finished) = oneshot::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("lore-query".into())
            // The engine plans and evaluates nested expressions recursively.
            .stack_size(16 << 20)
            .spawn(move || {
                job(Rc::new(SystemClock));
                let _ = done.send(());
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start a query thread");
        }
        // A job whose thread could not start (or panicked) ends the wait all the same; its
        // caller then finds no answer and says so.
        Box::pin(async move {
            let _ = finished.await;
        })
    }
}
