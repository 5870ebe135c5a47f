//! The `oauth2` crate's HTTP client over the core's [`HttpClient`] port, so the OAuth client
//! flows (an upstream identity provider, `lore login`) reach the network the way the rest of
//! lore does on each platform.

use std::future::Future;
use std::pin::Pin;

use lore_base::outbound::{Reach, Share};
use lore_base::ports::{HttpClient, OutboundRequest, PortError};

/// Lends an [`HttpClient`] to `oauth2`'s `request_async`, for requests to URLs the operator
/// configured (an identity provider) or the CLI's own server, in `share`.
pub struct PortHttp<'a>(pub &'a dyn HttpClient, pub Share);

/// The longest an exchange with an identity provider or a lore server may take.
const TIMEOUT_MS: u64 = 15_000;

impl<'c, 'a: 'c> oauth2::AsyncHttpClient<'c> for PortHttp<'a> {
    type Error = PortError;
    type Future = Pin<Box<dyn Future<Output = Result<oauth2::HttpResponse, PortError>> + 'c>>;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(async move {
            let headers = request
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        v.to_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            let outbound = OutboundRequest {
                method: request.method().as_str().to_string(),
                url: request.uri().to_string(),
                headers,
                body: request.into_body(),
                reach: Reach::Configured,
                share: self.1.clone(),
                timeout_ms: TIMEOUT_MS,
            };
            let response = self.0.send(outbound).await?;
            let mut builder = http::Response::builder().status(response.status);
            for (name, value) in &response.headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            builder
                .body(response.body)
                .map_err(|e| PortError(format!("malformed response: {e}")))
        })
    }
}
