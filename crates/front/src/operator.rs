//! Operator routes: `lore init` (with the owner's sign-in password), `lore org create|list`
//! `lore token create|list|revoke`, `lore org export|import|move-in` (an org's keys in pages,
//! `lore_directory::transfer`), and `lore doctor`'s and `lore reindex`'s memory index
//! report and rebuild (`doctor`, `reindex`, each with an optional `org`), and a pass over the
//! behaviors' schedules (`schedules`, which Spin needs from a cron) for a deployment whose database no `lore` CLI can open
//! (a Worker's D1, a Spin app's SQLite). They call the same [`lore_directory::admin`] functions as the
//! CLI.
//!
//! They exist only while [`crate::config::Config::operator_secret`] is set (the Worker's secret
//! `LORE_OPERATOR_SECRET`, Spin's variable `lore_operator_secret`; never natively, where the
//! CLI opens the database), and answer only `POST /operator/{action}` with
//! `Authorization: Bearer <that secret>`; without the secret every such path is a plain 404.
//! Delete the secret when you are done to close the door.

use crate::instance::{IndexWork, Lore};
use crate::responses::json_response;
use http::{Method, Request, Response, StatusCode};
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::keys::sha256_hex;
use lore_base::model::{Role, Scopes};
use lore_directory::admin::{self, TokenRequest};
use lore_directory::transfer;
use serde::Deserialize;
use serde_json::{Value, json};

pub const PREFIX: &str = "/operator/";
/// Shorter secrets are refused: the routes hand out owner tokens.
const MIN_SECRET_LEN: usize = 32;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct InitArgs {
    #[serde(default)]
    org: Option<String>,
    /// The owner's password for the sign-in page (OAuth clients), at least 12 characters.
    #[serde(default)]
    password: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrgArgs {
    name: String,
    /// Where its Durable Object is created (`weur`, ...; Workers only).
    #[serde(default)]
    location_hint: Option<String>,
    /// Where its data stays (`eu`, `fedramp`; Workers only).
    #[serde(default)]
    jurisdiction: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MaybeOrg {
    #[serde(default)]
    org: Option<String>,
    /// `reindex` only: queue every memory without a vector under the server's embedder.
    #[serde(default)]
    embeddings: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrgRef {
    org: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenArgs {
    org: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    scopes: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    expires_in_days: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeArgs {
    org: String,
    token_id: String,
}

/// A refused request: its status and JSON body.
type Refusal = (StatusCode, Value);

fn refuse(status: StatusCode, code: &str, message: impl Into<String>) -> Refusal {
    (
        status,
        json!({ "error": { "code": code, "message": message.into() } }),
    )
}

fn from_lore(e: LoreError) -> Refusal {
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, json!({ "error": e.to_json() }))
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Refusal> {
    let body = if body.is_empty() {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body)
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, "invalid_argument", e.to_string()))
}

/// Serves an operator request, or `None` when the path is not one (or the routes are off).
pub async fn handle(
    lore: &Lore,
    secret: Option<&str>,
    request: &Request<Vec<u8>>,
) -> Option<Response<Vec<u8>>> {
    let action = request.uri().path().strip_prefix(PREFIX)?;
    let secret = secret?;
    let (status, body) = match serve(lore, secret, action, request).await {
        Ok(value) => (StatusCode::OK, value),
        Err(refusal) => refusal,
    };
    Some(json_response(status, body))
}

/// An operator request on a route that is on: the secret's length, the method and the bearer
/// are checked before the action runs.
async fn serve(
    lore: &Lore,
    secret: &str,
    action: &str,
    request: &Request<Vec<u8>>,
) -> Result<Value, Refusal> {
    if secret.len() < MIN_SECRET_LEN {
        return Err(refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "misconfigured",
            format!(
                "LORE_OPERATOR_SECRET must be at least {MIN_SECRET_LEN} characters; the operator routes are off"
            ),
        ));
    }
    if request.method() != Method::POST {
        return Err(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request",
            "operator routes take POST with a JSON body",
        ));
    }
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    // Comparing digests keeps the comparison time independent of how much of the secret matched.
    if presented.map(sha256_hex) != Some(sha256_hex(secret)) {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "operator routes need Authorization: Bearer <LORE_OPERATOR_SECRET>",
        ));
    }
    run(lore, action, request.body()).await
}

async fn run(lore: &Lore, action: &str, body: &[u8]) -> Result<Value, Refusal> {
    let ports = lore.ports();
    match action {
        "init" => {
            let args: InitArgs = parse(body)?;
            let outcome = admin::init(ports, args.org.as_deref().unwrap_or("default"))
                .await
                .map_err(from_lore)?;
            // Also on an initialised database: this is how a deployed owner sets or changes
            // the sign-in password.
            if let Some(password) = &args.password {
                admin::set_owner_password(ports, password)
                    .await
                    .map_err(from_lore)?;
            }
            Ok(to_json(&outcome))
        }
        "org-create" => {
            let args: OrgArgs = parse(body)?;
            let placement = lore_base::model::Placement::new(
                args.location_hint.as_deref(),
                args.jurisdiction.as_deref(),
            )
            .map_err(from_lore)?;
            let issued = admin::create_placed_org(ports, &args.name, placement)
                .await
                .map_err(from_lore)?;
            Ok(to_json(&issued))
        }
        "org-list" => {
            let orgs = admin::list_orgs(ports).await.map_err(from_lore)?;
            Ok(json!({ "orgs": to_json(&orgs) }))
        }
        "token-create" => {
            let args: TokenArgs = parse(body)?;
            let role = args
                .role
                .as_deref()
                .map(Role::parse)
                .transpose()
                .map_err(from_lore)?;
            let scopes = Scopes::parse(args.scopes.as_deref().unwrap_or("mcp:read,mcp:write"))
                .map_err(from_lore)?;
            let now = ports.clock.now_ms();
            let issued = admin::create_token(
                ports,
                TokenRequest {
                    org: args.org,
                    role,
                    scopes,
                    principal: args.principal,
                    name: args.name,
                    expires_at_ms: args
                        .expires_in_days
                        .map(|d| now + i64::from(d) * 86_400_000),
                },
            )
            .await
            .map_err(from_lore)?;
            Ok(to_json(&issued))
        }
        "token-list" => {
            let args: OrgRef = parse(body)?;
            let tokens = admin::list_tokens(ports, &args.org)
                .await
                .map_err(from_lore)?;
            Ok(json!({ "tokens": to_json(&tokens) }))
        }
        "token-revoke" => {
            let args: RevokeArgs = parse(body)?;
            admin::revoke_token(ports, &args.org, &args.token_id)
                .await
                .map_err(from_lore)?;
            Ok(json!({ "revoked": args.token_id }))
        }
        "org-export" | "org-import" | "org-move-in" => {
            transfer(lore, action, body).await.map_err(from_lore)
        }
        "doctor" | "reindex" => {
            let args: MaybeOrg = parse(body)?;
            let work = match (action, args.embeddings) {
                ("doctor", false) => IndexWork::Check,
                ("doctor", true) => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        "invalid_argument",
                        "embeddings is for reindex (doctor changes nothing)",
                    ));
                }
                (_, false) => IndexWork::Rebuild,
                (_, true) => IndexWork::Embeddings,
            };
            lore.memory_index(args.org.as_deref(), work)
                .await
                .map_err(from_lore)
        }
        "schedules" => {
            let args: ScheduleArgs = parse(body)?;
            let now = match args.at_ms {
                Some(at) if lore.config.test_build => at,
                Some(_) => {
                    return Err(refuse(
                        StatusCode::BAD_REQUEST,
                        "invalid_argument",
                        "at_ms is for test builds only",
                    ));
                }
                None => ports.clock.now_ms(),
            };
            Ok(lore.schedule_pass(now, args.adopt).await)
        }
        other => Err(refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no operator action {other:?}; actions: init, org-create, org-list, org-export, org-import, org-move-in, token-create, token-list, token-revoke, doctor, reindex, schedules"
            ),
        )),
    }
}

/// `schedules`: a pass over every org with schedules (Spin has no timer: call it from a cron
/// every minute).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ScheduleArgs {
    /// Visit every org first and give behaviors saved before schedules ran their first run.
    #[serde(default)]
    adopt: bool,
    /// Test builds: the pass's time instead of the clock's.
    #[serde(default)]
    at_ms: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TransferArgs {
    org: String,
    /// `org-export`, `org-move-in`: where the page starts (the previous page's `next`).
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    /// `org-import`: the entries, `[key, base64 value]` each.
    #[serde(default)]
    entries: Vec<(String, String)>,
    /// `org-import`: the first page (refused unless the org is new here).
    #[serde(default)]
    first: bool,
    /// `org-import`: carry the file's tokens and passwords (`transfer::Credentials::Carry`)
    /// instead of leaving them to be issued anew.
    #[serde(default)]
    carry_credentials: bool,
}

/// `org-export`, `org-import` and `org-move-in` (`lore_directory::transfer`), a page per
/// request. Values travel as base64.
async fn transfer(lore: &Lore, action: &str, body: &[u8]) -> Result<Value, LoreError> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let args: TransferArgs =
        serde_json::from_slice(body).map_err(|e| LoreError::invalid("body", e.to_string()))?;
    let org = OrgId::parse(&args.org)?;
    let page_json = |page: transfer::Page| {
        let entries: Vec<(String, String)> = page
            .entries
            .into_iter()
            .map(|(k, v)| (k, b64.encode(v)))
            .collect();
        json!({ "org": org.as_str(), "entries": entries, "next": page.next })
    };
    match action {
        "org-export" => {
            let limit = args.limit.unwrap_or(transfer::MAX_PAGE);
            let page =
                transfer::export_page(lore.ports(), &org, args.after.as_deref(), limit).await?;
            Ok(page_json(page))
        }
        "org-import" => {
            let mut entries = Vec::with_capacity(args.entries.len());
            for (key, value) in args.entries {
                let value = b64.decode(value.as_bytes()).map_err(|e| {
                    LoreError::invalid(
                        "entries",
                        format!("the value of {key:?} is not base64: {e}"),
                    )
                })?;
                entries.push((key, value));
            }
            let credentials = if args.carry_credentials {
                transfer::Credentials::Carry
            } else {
                transfer::Credentials::IssueAnew
            };
            let done =
                transfer::import_page(lore.ports(), &org, entries, args.first, credentials).await?;
            Ok(json!({
                "org": org.as_str(),
                "written": done.written,
                "kept": done.kept,
                "credentials_left": done.credentials_left,
            }))
        }
        _ => {
            let Some(former) = &lore.former_store else {
                return Err(LoreError::invalid(
                    "action",
                    "this server keeps every org where it always did; there is nothing to move in",
                ));
            };
            let page =
                transfer::move_in_page(lore.ports(), former.as_ref(), &org, args.after.as_deref())
                    .await?;
            Ok(json!({ "org": org.as_str(), "moved": page.entries.len(), "next": page.next }))
        }
    }
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_default()
}
