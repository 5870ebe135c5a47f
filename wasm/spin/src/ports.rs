//! The clock, randomness and outbound HTTP ports on Spin: the WASI wall clock and monotonic
//! timer, `wasi:random`, and `wasi:http` outbound requests (which Spin checks against
//! `allowed_outbound_hosts`).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::Full;
use lore_base::ports::{
    Clock, HttpClient, OutboundRequest, OutboundResponse, PortError, Randomness,
};
use spin_sdk::http::body::IncomingBodyExt;

/// The WASI wall clock; sleeps on the WASI monotonic clock without blocking the host.
pub struct SpinClock;

impl Clock for SpinClock {
    #[expect(
        clippy::disallowed_methods,
        reason = "this is the Clock port; on wasm32-wasip2 std reads the WASI wall clock"
    )]
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn sleep(&self, ms: u64) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(spin_sdk::time::sleep(Duration::from_millis(ms)))
    }
}

/// `wasi:random/random`, the host's CSPRNG.
pub struct WasiRandom;

impl Randomness for WasiRandom {
    fn fill(&self, buf: &mut [u8]) {
        let bytes = spin_sdk::wasip3::random::random::get_random_bytes(buf.len() as u64);
        buf.copy_from_slice(&bytes[..buf.len()]);
    }
}

/// Outbound HTTP through `wasi:http` (Spin's outbound HTTP).
pub struct SpinHttp;

#[async_trait(?Send)]
impl HttpClient for SpinHttp {
    async fn send(&self, request: OutboundRequest) -> Result<OutboundResponse, PortError> {
        let fail = |e: &dyn std::fmt::Debug| {
            PortError(format!(
                "HTTP {} {} failed: {e:?}",
                request.method, request.url
            ))
        };
        let mut builder = http::Request::builder()
            .method(request.method.as_str())
            .uri(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let outbound = builder
            .body(Full::new(Bytes::from(request.body.clone())))
            .map_err(|e| fail(&e))?;
        let response = spin_sdk::http::send(outbound).await.map_err(|e| fail(&e))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let body = response
            .into_body()
            .bytes()
            .await
            .map_err(|e| fail(&e))?
            .to_vec();
        Ok(OutboundResponse {
            status,
            headers,
            body,
        })
    }
}
