//! The upstream identity providers people sign in with ([`Provider`]: GitHub, or any OAuth 2.0
//! / OpenID Connect provider), as configured by variables ([`from_vars`]).

/// What kind of provider, which decides how the person is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// GitHub (or GitHub Enterprise Server): `/user` gives `id` and `login`.
    GitHub,
    /// An OpenID Connect provider: `userinfo` gives `sub`, `email`, `name`.
    Oidc,
}

/// One configured provider.
#[derive(Clone)]
pub struct Provider {
    /// In URLs and identity keys: `github` or `oidc`.
    pub id: String,
    /// On the button: "GitHub", or the configured name.
    pub label: String,
    pub kind: ProviderKind,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub authorize_url: String,
    pub token_url: String,
    pub userinfo_url: String,
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("authorize_url", &self.authorize_url)
            .finish_non_exhaustive()
    }
}

/// The providers configured by `LORE_*` variables, read through `var` (the environment
/// natively, `[vars]` and secrets on Workers):
///
/// - GitHub: `LORE_GITHUB_CLIENT_ID`, `LORE_GITHUB_CLIENT_SECRET`, and for GitHub Enterprise
///   Server `LORE_GITHUB_URL` (default `https://github.com`) and `LORE_GITHUB_API_URL`
///   (default `https://api.github.com`).
/// - Any OIDC provider: `LORE_OIDC_CLIENT_ID`, `LORE_OIDC_CLIENT_SECRET`,
///   `LORE_OIDC_AUTH_URL`, `LORE_OIDC_TOKEN_URL`, `LORE_OIDC_USERINFO_URL`, optional
///   `LORE_OIDC_NAME` (the button's label) and `LORE_OIDC_SCOPES` (default
///   `openid email profile`).
pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Vec<Provider>, String> {
    let get = |name: &str| {
        var(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut providers = Vec::new();
    if let Some(client_id) = get("LORE_GITHUB_CLIENT_ID") {
        let web = get("LORE_GITHUB_URL").unwrap_or_else(|| "https://github.com".into());
        let api = get("LORE_GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
        let (web, api) = (web.trim_end_matches('/'), api.trim_end_matches('/'));
        providers.push(Provider {
            id: "github".into(),
            label: "GitHub".into(),
            kind: ProviderKind::GitHub,
            client_id,
            client_secret: Some(
                get("LORE_GITHUB_CLIENT_SECRET")
                    .ok_or("LORE_GITHUB_CLIENT_SECRET is needed with LORE_GITHUB_CLIENT_ID")?,
            ),
            authorize_url: format!("{web}/login/oauth/authorize"),
            token_url: format!("{web}/login/oauth/access_token"),
            userinfo_url: format!("{api}/user"),
            scopes: vec!["read:user".into(), "user:email".into()],
        });
    }
    if let Some(client_id) = get("LORE_OIDC_CLIENT_ID") {
        let need =
            |name: &str| get(name).ok_or(format!("{name} is needed with LORE_OIDC_CLIENT_ID"));
        providers.push(Provider {
            id: "oidc".into(),
            label: get("LORE_OIDC_NAME").unwrap_or_else(|| "single sign-on".into()),
            kind: ProviderKind::Oidc,
            client_id,
            client_secret: get("LORE_OIDC_CLIENT_SECRET"),
            authorize_url: need("LORE_OIDC_AUTH_URL")?,
            token_url: need("LORE_OIDC_TOKEN_URL")?,
            userinfo_url: need("LORE_OIDC_USERINFO_URL")?,
            scopes: get("LORE_OIDC_SCOPES")
                .unwrap_or_else(|| "openid email profile".into())
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        });
    }
    for p in &providers {
        for url in [&p.authorize_url, &p.token_url, &p.userinfo_url] {
            url::Url::parse(url).map_err(|e| format!("{} provider URL {url:?}: {e}", p.id))?;
        }
    }
    Ok(providers)
}
