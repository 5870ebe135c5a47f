//! Request parameters of the pages and the OAuth endpoints (query strings and
//! `x-www-form-urlencoded` bodies, where a parameter may appear once), cookies, and the error
//! a refused request gets: RFC 6749's shape, which the OAuth routes answer as JSON
//! (`oauth::reply`) and the pages as an error page.

use http::HeaderMap;

use crate::headers;

/// Decoded `name=value` pairs in order.
#[derive(Debug, Clone, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(bytes: &[u8]) -> Self {
        Self(
            url::form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn query(uri: &http::Uri) -> Self {
        Self::parse(uri.query().unwrap_or("").as_bytes())
    }

    /// The parameter's value; a parameter sent twice is an error (RFC 6749 section 3.1).
    pub fn one(&self, name: &str) -> Result<Option<&str>, OAuthError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
        let first = values.next();
        if values.next().is_some() {
            return Err(OAuthError::invalid_request(format!(
                "the {name} parameter was sent more than once"
            )));
        }
        Ok(first.map(String::as_str).filter(|v| !v.is_empty()))
    }

    /// A parameter that must be there.
    pub fn required(&self, name: &str) -> Result<&str, OAuthError> {
        self.one(name)?
            .ok_or_else(|| OAuthError::invalid_request(format!("the {name} parameter is missing")))
    }

    /// Every value of a repeatable parameter (checkboxes).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// Whether the body is `application/x-www-form-urlencoded`.
pub fn is_form(request_headers: &HeaderMap) -> bool {
    headers::get(request_headers, "content-type").is_some_and(|ct| {
        ct.split(';').next().is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
    })
}

/// The value of cookie `name`, if the request carries it.
pub fn cookie<'a>(request_headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    request_headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// An RFC 6749 error: the `error` code, a description for the developer, and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub error: &'static str,
    pub description: String,
    pub status: u16,
    /// Seconds after which the request may be made again (a rate limit's `Retry-After`).
    pub retry_after_s: Option<u64>,
}

impl OAuthError {
    fn new(error: &'static str, description: impl Into<String>, status: u16) -> Self {
        Self {
            error,
            description: description.into(),
            status,
            retry_after_s: None,
        }
    }
    /// Past a client address's rate of records made without credentials: HTTP 429.
    pub fn slow_down(d: impl Into<String>, retry_after_s: u64) -> Self {
        Self {
            retry_after_s: Some(retry_after_s.max(1)),
            ..Self::new("temporarily_unavailable", d, 429)
        }
    }
    pub fn invalid_request(d: impl Into<String>) -> Self {
        Self::new("invalid_request", d, 400)
    }
    pub fn invalid_client(d: impl Into<String>) -> Self {
        Self::new("invalid_client", d, 401)
    }
    pub fn invalid_grant(d: impl Into<String>) -> Self {
        Self::new("invalid_grant", d, 400)
    }
    pub fn unauthorized_client(d: impl Into<String>) -> Self {
        Self::new("unauthorized_client", d, 400)
    }
    pub fn unsupported_grant_type(d: impl Into<String>) -> Self {
        Self::new("unsupported_grant_type", d, 400)
    }
    pub fn unsupported_response_type(d: impl Into<String>) -> Self {
        Self::new("unsupported_response_type", d, 400)
    }
    pub fn invalid_scope(d: impl Into<String>) -> Self {
        Self::new("invalid_scope", d, 400)
    }
    /// RFC 8707: the resource parameter names something this server does not protect.
    pub fn invalid_target(d: impl Into<String>) -> Self {
        Self::new("invalid_target", d, 400)
    }
    pub fn access_denied(d: impl Into<String>) -> Self {
        Self::new("access_denied", d, 400)
    }
    /// RFC 7591 registration errors.
    pub fn invalid_redirect_uri(d: impl Into<String>) -> Self {
        Self::new("invalid_redirect_uri", d, 400)
    }
    pub fn invalid_client_metadata(d: impl Into<String>) -> Self {
        Self::new("invalid_client_metadata", d, 400)
    }
    pub fn server_error(d: impl Into<String>) -> Self {
        Self::new("server_error", d, 500)
    }
}

impl From<lore_base::error::LoreError> for OAuthError {
    fn from(e: lore_base::error::LoreError) -> Self {
        Self::server_error(e.to_string())
    }
}

impl From<lore_base::storage::StorageError> for OAuthError {
    fn from(e: lore_base::storage::StorageError) -> Self {
        Self::server_error(e.to_string())
    }
}

/// Compares two byte strings in time that depends only on their length.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
