//! The issuer's endpoints ([`Endpoints`]).

/// lore's OAuth endpoints under one issuer.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub issuer: String,
    pub authorize: String,
    pub token: String,
    pub register: String,
    pub revoke: String,
}

impl Endpoints {
    pub fn new(base: &str) -> Self {
        Self {
            issuer: base.to_string(),
            authorize: format!("{base}/oauth/authorize"),
            token: format!("{base}/oauth/token"),
            register: format!("{base}/oauth/register"),
            revoke: format!("{base}/oauth/revoke"),
        }
    }
}
