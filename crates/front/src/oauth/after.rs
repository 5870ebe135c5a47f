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
/// no other host or scheme (`//`, `\\`), no `..` (nor a dot or slash percent-encoded in the
/// path, which a browser would resolve as one), only URL characters.
pub(crate) fn is_app_path(s: &str) -> bool {
    let path = s.split('?').next().unwrap_or(s).to_ascii_lowercase();
    s.len() <= 512
        && s.starts_with("/app/")
        && !s.contains("//")
        && !s.contains("..")
        && !path.contains("%2e")
        && !path.contains("%2f")
        && !path.contains("%5c")
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~?=&%+".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::is_app_path;

    #[test]
    fn only_this_servers_app_paths_are_gone_back_to() {
        for ok in [
            "/app/acme/memory",
            "/app/acme/memory?q=a%20b&kind=note",
            "/app/acme/records/service?prop=team&value=%2e%2e",
        ] {
            assert!(is_app_path(ok), "{ok}");
        }
        for bad in [
            "/app//evil.example/x",
            "/app/../oauth/tokens",
            "/app/%2e%2e/oauth/tokens",
            "/app/%2E%2E/oauth/tokens",
            "/app/acme%2f..%2f../x",
            "/app/acme%5c%5cevil.example",
            "/app/acme\\evil",
            "/oauth/tokens",
            "https://evil.example/app/x",
            "/app/acme/memory\r\nSet-Cookie: x",
        ] {
            assert!(!is_app_path(bad), "{bad}");
        }
    }
}
