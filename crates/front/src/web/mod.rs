//! The web kit the app and the OAuth pages share: the page (layout, styles, headers; `maud`
//! templates that escape every value), form parameters and cookies, the browser session with
//! its CSRF token, and what a request may leave in storage before anyone signs in. It imports
//! nothing of `oauth` or `app`; both import it.

pub mod anonymous;
pub mod form;
pub mod page;
pub mod session;

use http::{Request, Response};

use crate::headers;
use crate::instance::Lore;
use form::Params;
use session::Session;

/// One request to a page or an OAuth route: the core, the request, and the issuer (the
/// server's public base URL) it is served under.
pub struct Cx<'a> {
    pub lore: &'a Lore,
    pub request: &'a Request<Vec<u8>>,
    /// The issuer (the server's public base URL).
    pub base: String,
    /// Whether the issuer is HTTPS (cookies are then `Secure`).
    pub secure: bool,
}

impl<'a> Cx<'a> {
    /// A request served under the issuer `base` (cookies are `Secure` when it is HTTPS).
    pub fn new(lore: &'a Lore, request: &'a Request<Vec<u8>>, base: String) -> Self {
        Self {
            lore,
            request,
            secure: base.starts_with("https://"),
            base,
        }
    }

    /// The share of outbound requests and anonymous records this request's client takes: its
    /// address as the adapter saw it (`ClientAddr`), or one share for every client whose
    /// address is unknown.
    pub fn client_share(&self) -> lore_base::outbound::Share {
        lore_base::outbound::Share::Address(anonymous::client_key(self.request))
    }

    /// The session of a page's form post, after the CSRF checks: the `Origin`, when the
    /// browser sends one, is this server's, and the form's token is the session's.
    pub async fn session_for_post(&self, params: &Params) -> Option<Session> {
        if let Some(origin) = headers::get(self.request.headers(), "origin")
            && !origin.eq_ignore_ascii_case(&self.base)
            && self
                .lore
                .config
                .origins
                .check(self.request.headers())
                .is_err()
        {
            tracing::warn!(%origin, "form post from another origin refused");
            return None;
        }
        let session = Session::load(self.lore, self.request.headers(), self.secure)
            .await
            .ok()
            .flatten()?;
        session.check_csrf(params).ok()?;
        Some(session)
    }

    /// The page for a form post that failed the CSRF checks.
    pub fn stale_form(&self) -> Response<Vec<u8>> {
        page::error_page(
            403,
            "This form has expired",
            "The form was not sent from this site's current page, or your session ended. Go back, reload the page and try again.",
        )
    }
}
