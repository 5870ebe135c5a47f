//! Where a browser goes after signing in: back to the authorization request it signed in for,
//! to the web app page that sent it, or to the token page. Only this server's own paths.

/// Where a sign-in goes next: the consent page of the authorization request it was for, the
/// web app page that sent the person to sign in, or the token page.
pub(crate) fn after_sign_in(request: Option<&str>) -> String {
    match request {
        Some(id) if is_request_id(id) => format!("/oauth/consent?request={id}"),
        Some(path) if is_app_path(path) => path.to_string(),
        _ => "/oauth/tokens".to_string(),
    }
}

pub(crate) fn is_request_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A path of this server's web app, safe to send a browser to after sign-in: under `/app/`,
/// no other host or scheme (`//`, `\\`), no `..`, only URL characters.
pub(crate) fn is_app_path(s: &str) -> bool {
    s.len() <= 512
        && s.starts_with("/app/")
        && !s.contains("//")
        && !s.contains("..")
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~?=&%+".contains(&b))
}
