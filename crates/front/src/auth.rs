//! Authentication at the front: the bearer token of a request verified against the directory
//! (or the local owner when the server runs without auth), its audience checked against this
//! resource, the [`Caller`] resolved for the request's org, and the token's and org's
//! rate-limit buckets taken. A caller resolved before for the same token is reused while its
//! org's auth stamp is unchanged (`lore_directory::callers`): one read instead of three.

use lore_directory::caller::{self, Caller};
use lore_directory::callers::Cached;
use lore_directory::tokens;
use lore_records::metrics::Counts;

use crate::instance::Lore;
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};

impl Lore {
    /// The caller of a request: a verified bearer token, or the local owner when the server
    /// runs without auth. On failure, also says whether a token was sent (for the challenge).
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        path_org: Option<&str>,
    ) -> Result<Caller, (LoreError, bool)> {
        self.authenticate_reading(headers, path_org, |_| Vec::new())
            .await
    }

    /// [`Lore::authenticate`], for a request that reads the org keys `first_reads` names
    /// first. A caller kept from before is checked with one read, which then also reads those
    /// keys (the caller carries their values for the request: `Caller::read_ahead`);
    /// `first_reads` is called only then, so a request is looked into only once its token is
    /// known.
    pub async fn authenticate_reading(
        &self,
        headers: &http::HeaderMap,
        path_org: Option<&str>,
        first_reads: impl FnOnce(&OrgKeys) -> Vec<String>,
    ) -> Result<Caller, (LoreError, bool)> {
        let mut fresh = None;
        let credential = match bearer(headers) {
            Some(token) => {
                let token = token.map_err(|e| (e, true))?;
                let hash = keys::sha256_hex(token);
                let ports = &self.engine.ports;
                if let Some(cached) = self
                    .callers
                    .get(ports, &hash, path_org, first_reads)
                    .await
                    .map_err(|e| (e, true))?
                {
                    self.check_audience(cached.audience.as_deref(), headers, path_org)
                        .map_err(|e| (e, true))?;
                    self.rate_check(&cached.caller)
                        .await
                        .map_err(|e| (e, true))?;
                    return Ok(cached.caller);
                }
                fresh = Some(hash);
                tokens::verify_token(ports, token, path_org)
                    .await
                    .map_err(|e| (e, true))?
            }
            None if self.config.no_auth => caller::local_owner(&self.engine.ports)
                .await
                .map_err(|e| (e, false))?,
            None => {
                return Err((
                    LoreError::Unauthorized(
                        "this server needs Authorization: Bearer <token>; create one with `lore token create`".into(),
                    ),
                    false,
                ));
            }
        };
        let (audience, expires_at_ms) = credential
            .token
            .as_ref()
            .map_or((None, None), |t| (t.audience.clone(), t.expires_at_ms));
        self.check_audience(audience.as_deref(), headers, path_org)
            .map_err(|e| (e, true))?;
        let caller = caller::resolve_caller(
            &self.engine.ports,
            credential,
            path_org,
            &self.config.default_org,
        )
        .await
        .map_err(|e| (e, true))?;
        if let Some(hash) = fresh {
            let cached = Cached {
                caller: caller.clone(),
                audience,
                expires_at_ms,
            };
            self.callers.put(&hash, path_org, cached);
        }
        self.rate_check(&caller).await.map_err(|e| (e, true))?;
        Ok(caller)
    }

    /// Refuses a token issued for another resource than the one this request reached.
    fn check_audience(
        &self,
        audience: Option<&str>,
        headers: &http::HeaderMap,
        path_org: Option<&str>,
    ) -> Result<(), LoreError> {
        let Some(audience) = audience else {
            return Ok(());
        };
        let base = self.config.base_url(headers);
        if crate::oauth::resource::audience_allows(audience, base.as_deref(), path_org) {
            return Ok(());
        }
        Err(LoreError::Unauthorized(format!(
            "the token was issued for {audience}, not for this resource; sign in again for this URL"
        )))
    }

    /// Takes one request from the caller's token and org buckets; over a limit, the error
    /// names it.
    pub(crate) async fn rate_check(&self, caller: &Caller) -> Result<(), LoreError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let own = self
            .engine
            .org_record(caller)
            .await?
            .and_then(|o| o.rate_limits);
        let limits = self.config.rate_limits.for_org(own);
        if limits.token_per_minute == 0 && limits.org_per_minute == 0 {
            return Ok(());
        }
        let now = self.engine.ports.clock.now_ms();
        let token = caller
            .token_id()
            .map_or_else(|| caller.principal().id.clone(), str::to_string);
        let named = [
            ("token", format!("tok/{token}"), limits.token_per_minute),
            (
                "org",
                format!("org/{}", caller.org()),
                limits.org_per_minute,
            ),
        ];
        let named: Vec<_> = named.into_iter().filter(|(_, _, r)| *r > 0).collect();
        let buckets: Vec<(String, u32)> = named.iter().map(|(_, k, r)| (k.clone(), *r)).collect();
        let decision = limiter.take(caller.org().as_str(), &buckets, now).await;
        if let Some((i, retry_after_ms)) = decision.refused {
            let refused: Result<(), LoreError> = Err(LoreError::RateLimited {
                limit: named[i].0,
                per_minute: named[i].2,
                retry_after_ms,
            });
            // Refusals show in the org's usage as cap hits of the pseudo-tool `rate_limited`.
            self.engine
                .count_usage(caller, "rate_limited", Counts::of(&refused))
                .await;
            return refused;
        }
        Ok(())
    }

    /// The caller for local, tokenless use: the local owner in `org`.
    /// Without `org`: the org `lore init` created, else the configured default org.
    pub async fn local_caller(&self, org: Option<&str>) -> Result<Caller, LoreError> {
        let credential = caller::local_owner(&self.engine.ports).await?;
        let default = match org {
            None => self.tokenless_org().await?,
            Some(_) => self.config.default_org.clone(),
        };
        caller::resolve_caller(&self.engine.ports, credential, org, &default).await
    }

    /// The org a caller without a token reaches when none is named: the org `lore init`
    /// created, else the configured default org.
    pub(crate) async fn tokenless_org(&self) -> Result<OrgId, LoreError> {
        Ok(
            match self.engine.ports.storage.get(keys::LOCAL_ORG).await? {
                Some(bytes) => OrgId::parse(&String::from_utf8_lossy(&bytes)).ok(),
                None => None,
            }
            .unwrap_or_else(|| self.config.default_org.clone()),
        )
    }
}

/// The bearer token of a request, if it sends an `Authorization` header: the token, or an
/// error when the header uses another scheme.
pub(crate) fn bearer(headers: &http::HeaderMap) -> Option<Result<&str, LoreError>> {
    let value = crate::headers::get(headers, "authorization")?;
    // The scheme name is case-insensitive (RFC 7235).
    Some(
        value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .ok_or_else(|| {
                LoreError::Unauthorized("use the Authorization: Bearer <token> scheme".into())
            }),
    )
}
