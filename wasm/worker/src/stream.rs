//! A reply that streams out of an org object: the core serves the request on a task of its
//! own, and what it sends (a script's `notifications/progress` as SSE) goes out as a
//! `ReadableStream` while the script runs, through the Worker to the client. The same shape as
//! the native server's streamed replies.

use std::rc::Rc;

use futures_channel::mpsc;
use futures_util::StreamExt;
use lore_front::Lore;
use lore_front::mcp::reply::{Forward, Streamed};
use worker::{Response, ResponseBuilder};

/// How a request was answered.
pub enum Served {
    /// The whole reply; nothing was streamed.
    Whole(http::Response<Vec<u8>>),
    /// A reply whose body is still being produced.
    Streamed(Response),
}

/// Serves `request` with `lore`, streaming if the core does. `done` runs once the core has
/// answered (for a streamed reply: after its last byte was handed over), with the core's
/// response.
pub async fn serve(
    lore: Rc<Lore>,
    request: http::Request<Vec<u8>>,
    done: impl FnOnce(&http::Response<Vec<u8>>) + 'static,
) -> worker::Result<Served> {
    let (tx, mut rx) = mpsc::unbounded();
    let out = Rc::new(Forward({
        let tx = tx.clone();
        move |part| {
            // A client that went away closed the receiver; the run goes on and commits.
            let _ = tx.unbounded_send(part);
        }
    }));
    wasm_bindgen_futures::spawn_local(async move {
        let response = lore.handle_streaming(request, out).await;
        done(&response);
        let _ = tx.unbounded_send(Streamed::Whole(response));
    });
    match rx.next().await {
        Some(Streamed::Whole(response)) => Ok(Served::Whole(response)),
        Some(Streamed::Head(status, headers)) => {
            let body = rx.filter_map(|message| async move {
                match message {
                    Streamed::Chunk(bytes) => Some(Ok::<_, worker::Error>(bytes)),
                    Streamed::Whole(rest) => Some(Ok(rest.into_body())),
                    Streamed::Head(..) => None,
                }
            });
            let out = worker::Headers::new();
            for (name, value) in &headers {
                out.append(name, value)?;
            }
            let response = ResponseBuilder::new()
                .with_status(status)
                .with_headers(out)
                .from_stream(body)?;
            Ok(Served::Streamed(response))
        }
        Some(Streamed::Chunk(_)) | None => Err(worker::Error::RustError(
            "the reply ended before it started".into(),
        )),
    }
}
