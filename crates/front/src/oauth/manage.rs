//! The token-management page: the applications a signed-in user allowed (one row per live
//! grant), each revocable with one button.

use http::Response;

use super::grants;
use super::pages;
use crate::web::Cx;
use crate::web::form::Params;
use crate::web::page;
use crate::web::session::Session;

fn when(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "never".to_string(),
            |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
}

/// `GET /oauth/tokens`.
pub async fn page(cx: &Cx<'_>) -> Response<Vec<u8>> {
    let session = match Session::load(cx.lore, cx.request.headers(), cx.secure).await {
        Ok(Some(s)) if s.record.principal.is_some() => s,
        Ok(_) => return page::see_other("/oauth/signin", None),
        Err(e) => return page::error_page(500, "Server error", &e.description),
    };
    let principal = session.record.principal.clone().unwrap_or_default();
    let list = match grants::of_principal(cx.lore.ports(), &principal).await {
        Ok(l) => l,
        Err(e) => return page::error_page(500, "Server error", &e.to_string()),
    };
    let rows: Vec<pages::GrantRow> = list
        .into_iter()
        .filter(|g| g.revoked_at_ms.is_none())
        .map(|g| pages::GrantRow {
            id: g.id,
            client: g.client_name,
            org: g.org.to_string(),
            scopes: g.scopes.to_oauth_string(),
            created: when(Some(g.created_at_ms)),
            last_used: when(g.refreshed_at_ms),
        })
        .collect();
    let params = Params::query(cx.request.uri());
    let notice = params
        .one("revoked")
        .ok()
        .flatten()
        .map(|_| "Access revoked: that application's tokens no longer work.");
    let user = match cx
        .lore
        .ports()
        .record::<lore_base::model::Principal>(&lore_base::keys::principal(&principal))
        .await
    {
        Ok(Some(p)) => p.name,
        _ => principal.clone(),
    };
    page::html(
        200,
        pages::tokens(&session.record.csrf, &user, &rows, notice),
        None,
    )
}

/// `POST /oauth/tokens/revoke`: revokes one of the user's grants.
pub async fn revoke(cx: &Cx<'_>, params: &Params) -> Response<Vec<u8>> {
    let Some(session) = cx.session_for_post(params).await else {
        return cx.stale_form();
    };
    let Some(principal) = session.record.principal.clone() else {
        return cx.stale_form();
    };
    let Some(id) = params.one("grant").ok().flatten() else {
        return page::error_page(400, "Nothing to revoke", "The form named no application.");
    };
    let grant: Option<grants::Grant> = match cx
        .lore
        .ports()
        .record(&lore_base::keys::oauth_grant(id))
        .await
    {
        Ok(g) => g,
        Err(e) => return page::error_page(500, "Server error", &e.to_string()),
    };
    match grant {
        Some(g) if g.principal == principal => {
            if let Err(e) = grants::revoke(cx.lore.ports(), id, "revoked on the token page").await {
                return page::error_page(500, "Server error", &e.to_string());
            }
            page::see_other("/oauth/tokens?revoked=1", None)
        }
        _ => page::error_page(404, "Unknown application", "You hold no such grant."),
    }
}
