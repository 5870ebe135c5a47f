//! What crosses between the request thread that runs a script natively and the process that
//! runs its JavaScript (`src/scripts.rs` and `src/script_child.rs`), and how: each message is
//! a frame, a 4-byte little-endian length and then the message as JSON. The process gets jobs
//! and the answers to its SDK calls ([`ToScript`]); it sends its calls, progress notes, how
//! each job ended and when it is ready for the next ([`FromScript`]). Nothing here does I/O.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::failure::SdkError;
use crate::remote::{Ended, Job};

/// The largest frame either side accepts: a call's arguments and a run's result are bounded
/// by the caps long before this; a frame past it means the other side is broken.
pub const MAX_FRAME: usize = 64 << 20;

/// To the script's process.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToScript {
    /// Run this job (a top-level run, or a script operation nested in a running one).
    Job(Job),
    /// The answer to call `call`; `over_cap`: the run's buffered writes are past their cap.
    Answer {
        call: u64,
        result: Result<Value, SdkError>,
        over_cap: bool,
    },
}

/// From the script's process.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromScript {
    /// Job `job` makes an SDK call.
    Call {
        job: u64,
        call: u64,
        path: String,
        args: Value,
    },
    Progress {
        job: u64,
        what: String,
    },
    /// Job `job` is over.
    Done {
        job: u64,
        ended: Ended,
    },
    /// No job runs and the next one's realm is made; the process holds `held` bytes.
    Ready {
        held: u64,
    },
}

/// `message` as one frame.
pub fn frame(message: &impl Serialize) -> Vec<u8> {
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// Why a stream of frames is unusable.
#[derive(Debug, PartialEq, Eq)]
pub struct BadFrame(pub String);

/// The first whole frame at the start of `buffer`, taken out of it; `Ok(None)` while the
/// frame is not all there yet.
pub fn next_frame<T: for<'de> Deserialize<'de>>(
    buffer: &mut Vec<u8>,
) -> Result<Option<T>, BadFrame> {
    let Some(head) = buffer.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    if len > MAX_FRAME {
        return Err(BadFrame(format!("a frame of {len} bytes")));
    }
    if buffer.len() < 4 + len {
        return Ok(None);
    }
    let message = serde_json::from_slice(&buffer[4..4 + len])
        .map_err(|e| BadFrame(format!("an unreadable frame: {e}")));
    buffer.drain(..4 + len);
    message.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::{Cap, ScriptCaps, Used};
    use crate::failure::Failure;
    use crate::host::HostSpec;

    #[test]
    fn frames_come_back_as_they_were_sent_in_any_pieces() {
        let job = ToScript::Job(Job {
            key: 7,
            parent: Some(3),
            spec: HostSpec {
                caps: ScriptCaps::default(),
                started_ms: 1,
                args: serde_json::json!({"a": [1, 2]}),
                seed: 9,
            },
            code: "return ctx.args.a".into(),
            reports_progress: true,
        });
        let done = FromScript::Done {
            job: 7,
            ended: Ended {
                outcome: Err(Failure::cap(Cap::Memory, &ScriptCaps::default())),
                logs: vec!["x".into()],
                used: Used::default(),
            },
        };
        let mut stream = frame(&job);
        stream.extend(frame(&done));
        let mut buffer = Vec::new();
        let mut got = Vec::new();
        for byte in stream {
            buffer.push(byte);
            if let Some(m) = next_frame::<Value>(&mut buffer).unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got.len(), 2);
        let back: FromScript = serde_json::from_value(got[1].clone()).unwrap();
        let FromScript::Done { ended, .. } = back else {
            panic!("{back:?}")
        };
        let failure = ended.outcome.unwrap_err();
        assert_eq!(
            (failure.code, failure.cap),
            ("cap_exceeded", Some(Cap::Memory))
        );
        let mut huge = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        huge.push(0);
        assert!(next_frame::<Value>(&mut huge).is_err());
    }
}
