//! The server-rendered pages: sign-in, consent, token management and errors. Plain HTML with
//! one inline stylesheet: no scripts, no third-party assets, labelled controls, visible focus,
//! and a restrictive Content-Security-Policy. Every value from a request or a record is
//! escaped by [`esc`].

use http::Response;

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1b1b1f;--bg:#f6f6f4;--card:#fff;--muted:#55565c;--line:#c9c9cf;--accent:#1f4fd1;--accent-fg:#fff;--danger:#a4161a}
@media (prefers-color-scheme:dark){:root{--fg:#ececf1;--bg:#151518;--card:#1f1f24;--muted:#b0b0b8;--line:#44444c;--accent:#8fb0ff;--accent-fg:#0b0b0e;--danger:#ff8a8f}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:34rem;margin:3rem auto;padding:2rem;background:var(--card);border:1px solid var(--line);border-radius:12px}
h1{font-size:1.5rem;margin:0 0 1rem}
h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
p,ul{margin:.5rem 0}
.brand{font-weight:700;letter-spacing:.04em;color:var(--muted);margin:0 0 1.25rem;font-size:.9rem;text-transform:uppercase}
.muted{color:var(--muted);font-size:.92rem}
label{display:block;font-weight:600;margin:1rem 0 .25rem}
input[type=password],input[type=text]{width:100%;padding:.6rem .7rem;font:inherit;color:inherit;background:transparent;border:1px solid var(--line);border-radius:6px}
fieldset{border:1px solid var(--line);border-radius:8px;margin:1rem 0;padding:.5rem 1rem 1rem}
legend{font-weight:600;padding:0 .25rem}
.choice{display:flex;gap:.6rem;align-items:flex-start;margin:.6rem 0;font-weight:400}
.choice input{margin-top:.3rem;width:1.1rem;height:1.1rem}
.choice span small{display:block;color:var(--muted)}
.actions{display:flex;gap:.75rem;flex-wrap:wrap;margin-top:1.5rem}
button,.button{font:inherit;font-weight:600;padding:.6rem 1.1rem;border-radius:6px;border:1px solid var(--accent);cursor:pointer;text-decoration:none;display:inline-block}
.primary{background:var(--accent);color:var(--accent-fg)}
.secondary{background:transparent;color:var(--accent)}
.danger{background:transparent;color:var(--danger);border-color:var(--danger)}
button:focus-visible,a:focus-visible,input:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.alert{border-left:4px solid var(--danger);padding:.5rem .75rem;margin:1rem 0;background:transparent}
.or{margin:1.25rem 0;color:var(--muted);text-align:center}
table{width:100%;border-collapse:collapse;font-size:.92rem}
th,td{text-align:left;padding:.45rem .3rem;border-bottom:1px solid var(--line);vertical-align:top}
code{font-size:.9em;word-break:break-all}
main.wide{max-width:56rem}
.scroll{overflow-x:auto}
td.when{white-space:nowrap}
";

/// A whole page around `body` (already HTML).
pub fn layout(title: &str, body: &str) -> String {
    page(title, body, "")
}

/// A page for a table: a wider column.
pub fn layout_wide(title: &str, body: &str) -> String {
    page(title, body, " class=\"wide\"")
}

fn page(title: &str, body: &str, main_attrs: &str) -> String {
    document(
        &format!("{} · lore", esc(title)),
        "",
        &format!("<main{main_attrs}>\n<p class=\"brand\">lore</p>\n{body}\n</main>"),
    )
}

/// The HTML document every page of lore's (sign-in, consent, tokens, the app) is: its head
/// with `title` (already escaped) and the shared style plus `style`, then `body` (HTML).
pub fn document(title: &str, style: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<meta name=\"referrer\" content=\"same-origin\">\n<title>{title}</title>\n<style>{STYLE}{style}</style>\n</head>\n\
<body>\n{body}\n</body>\n</html>\n"
    )
}

/// An HTML response with the page headers: no caching, no framing, no scripts.
pub fn html(status: u16, page: String, set_cookie: Option<&str>) -> Response<Vec<u8>> {
    let mut response = Response::new(page.into_bytes());
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
    let h = response.headers_mut();
    let pairs = [
        ("content-type", "text/html; charset=utf-8"),
        ("cache-control", "no-store"),
        (
            "content-security-policy",
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("x-content-type-options", "nosniff"),
        // `same-origin`, not `no-referrer`: with the latter a browser sends `Origin: null` on
        // the page's own form posts, which the CSRF check refuses.
        ("referrer-policy", "same-origin"),
    ];
    for (name, value) in pairs {
        h.insert(name, http::HeaderValue::from_static(value));
    }
    if let Some(cookie) = set_cookie.and_then(|c| http::HeaderValue::from_str(c).ok()) {
        h.append(http::header::SET_COOKIE, cookie);
    }
    response
}

/// A redirect after a form post (303) or to the next page.
pub fn see_other(location: &str, set_cookie: Option<&str>) -> Response<Vec<u8>> {
    let mut response = html(
        303,
        layout(
            "Redirecting",
            &format!("<p><a href=\"{0}\">Continue</a></p>", esc(location)),
        ),
        set_cookie,
    );
    if let Ok(v) = http::HeaderValue::from_str(location) {
        response.headers_mut().insert(http::header::LOCATION, v);
    }
    response
}

/// A page that explains a failure and what to do.
pub fn error_page(status: u16, title: &str, message: &str) -> Response<Vec<u8>> {
    html(
        status,
        layout(
            title,
            &format!(
                "<h1>{}</h1>\n<p role=\"alert\" class=\"alert\">{}</p>\n\
<p class=\"muted\">Close this window and start again from your application.</p>",
                esc(title),
                esc(message)
            ),
        ),
        None,
    )
}

fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
        esc(name),
        esc(value)
    )
}

/// What the sign-in page offers.
pub struct SignIn<'a> {
    pub csrf: &'a str,
    /// Where to go after signing in (a pending authorization request, or the token page).
    pub then: &'a str,
    /// For whom: the client's name when an application asked.
    pub client_name: Option<&'a str>,
    pub password: bool,
    /// Upstream providers: (id, label).
    pub providers: &'a [(String, String)],
    pub error: Option<&'a str>,
}

pub fn sign_in(page: &SignIn) -> String {
    let mut body = String::from("<h1>Sign in to lore</h1>\n");
    if let Some(name) = page.client_name {
        body.push_str(&format!(
            "<p><strong>{}</strong> wants to connect to your lore account. Sign in to continue.</p>\n",
            esc(name)
        ));
    }
    if let Some(error) = page.error {
        body.push_str(&format!(
            "<p role=\"alert\" class=\"alert\">{}</p>\n",
            esc(error)
        ));
    }
    for (id, label) in page.providers {
        body.push_str(&format!(
            "<form method=\"post\" action=\"/oauth/upstream/start\">{}{}{}\
<button type=\"submit\" class=\"button secondary\">Continue with {}</button></form>\n",
            hidden("csrf", page.csrf),
            hidden("then", page.then),
            hidden("provider", id),
            esc(label)
        ));
    }
    if page.password {
        if !page.providers.is_empty() {
            body.push_str("<p class=\"or\">or, as the server's owner</p>\n");
        }
        body.push_str(&format!(
            "<form method=\"post\" action=\"/oauth/signin\">{}{}\
<input type=\"text\" name=\"username\" value=\"owner\" autocomplete=\"username\" hidden aria-hidden=\"true\" tabindex=\"-1\">\n\
<label for=\"password\">Owner password</label>\n\
<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required autofocus>\n\
<p class=\"muted\">The password set with <code>lore init</code>.</p>\n\
<div class=\"actions\"><button type=\"submit\" class=\"primary\">Sign in</button></div></form>\n",
            hidden("csrf", page.csrf),
            hidden("then", page.then),
        ));
    }
    if !page.password && page.providers.is_empty() {
        body.push_str(
            "<p class=\"alert\" role=\"alert\">No way to sign in is configured on this server: \
set an owner password with <code>lore init</code>, or configure an identity provider.</p>\n",
        );
    }
    layout("Sign in", &body)
}

/// One org the user may pick on the consent page.
pub struct OrgChoice {
    pub name: String,
    pub role: String,
}

pub struct Consent<'a> {
    pub csrf: &'a str,
    pub request: &'a str,
    pub client_name: &'a str,
    pub client_id: &'a str,
    pub redirect_host: &'a str,
    pub user: &'a str,
    pub orgs: &'a [OrgChoice],
    /// Set when the resource names one org: the only choice.
    pub pinned_org: Option<&'a str>,
    pub write_requested: bool,
}

pub fn consent(page: &Consent) -> String {
    let mut body = format!(
        "<h1>Allow {} to use lore?</h1>\n\
<p><strong>{}</strong> is asking to act as <strong>{}</strong> through lore's MCP tools.</p>\n\
<p class=\"muted\">Client <code>{}</code>; after you answer you return to <code>{}</code>.</p>\n",
        esc(page.client_name),
        esc(page.client_name),
        esc(page.user),
        esc(page.client_id),
        esc(page.redirect_host)
    );
    body.push_str(&format!(
        "<form method=\"post\" action=\"/oauth/consent\">{}{}\n",
        hidden("csrf", page.csrf),
        hidden("request", page.request)
    ));
    if page.orgs.is_empty() {
        body.push_str(
            "<p role=\"alert\" class=\"alert\">You are not a member of any org on this server yet. \
Ask an org admin to invite you, then connect again.</p>\n\
<div class=\"actions\"><button type=\"submit\" name=\"decision\" value=\"deny\" class=\"secondary\">Cancel</button></div></form>\n",
        );
        return layout("Allow access", &body);
    }
    body.push_str("<fieldset>\n<legend>Organization</legend>\n");
    for (i, org) in page.orgs.iter().enumerate() {
        let checked = if i == 0 { " checked" } else { "" };
        body.push_str(&format!(
            "<label class=\"choice\"><input type=\"radio\" name=\"org\" value=\"{0}\"{checked}>\
<span>{0} <small>your role: {1}</small></span></label>\n",
            esc(&org.name),
            esc(&org.role)
        ));
    }
    if page.pinned_org.is_some() {
        body.push_str("<p class=\"muted\">The application asked for this org only.</p>\n");
    }
    body.push_str("</fieldset>\n<fieldset>\n<legend>Permissions</legend>\n");
    body.push_str(
        "<label class=\"choice\"><input type=\"checkbox\" name=\"scope\" value=\"mcp:read\" checked disabled>\
<span>Read <small>search memory and read the org's records (mcp:read)</small></span></label>\n\
<input type=\"hidden\" name=\"scope\" value=\"mcp:read\">\n",
    );
    if page.write_requested {
        body.push_str(
            "<label class=\"choice\"><input type=\"checkbox\" name=\"scope\" value=\"mcp:write\" checked>\
<span>Write <small>save memories and change records, within your role (mcp:write)</small></span></label>\n",
        );
    }
    body.push_str(
        "</fieldset>\n<div class=\"actions\">\
<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"primary\">Allow</button>\
<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"secondary\">Deny</button></div>\n</form>\n",
    );
    layout("Allow access", &body)
}

/// One approved application on the token page.
pub struct GrantRow {
    pub id: String,
    pub client: String,
    pub org: String,
    pub scopes: String,
    pub created: String,
    pub last_used: String,
}

pub fn tokens(csrf: &str, user: &str, grants: &[GrantRow], notice: Option<&str>) -> String {
    let mut body = format!(
        "<h1>Connected applications</h1>\n<p>Signed in as <strong>{}</strong>.</p>\n",
        esc(user)
    );
    if let Some(n) = notice {
        body.push_str(&format!("<p role=\"status\">{}</p>\n", esc(n)));
    }
    if grants.is_empty() {
        body.push_str("<p class=\"muted\">No application holds a token of yours.</p>\n");
    } else {
        body.push_str(
            "<div class=\"scroll\"><table>\n<caption class=\"muted\">Applications you allowed, and what they may do</caption>\n\
<thead><tr><th scope=\"col\">Application</th><th scope=\"col\">Org</th><th scope=\"col\">Scopes</th>\
<th scope=\"col\">Allowed</th><th scope=\"col\">Last refreshed</th><th scope=\"col\"><span class=\"muted\">Action</span></th></tr></thead>\n<tbody>\n",
        );
        for g in grants {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"when\">{}</td><td class=\"when\">{}</td><td>\
<form method=\"post\" action=\"/oauth/tokens/revoke\">{}{}\
<button type=\"submit\" class=\"danger\" aria-label=\"Revoke access of {}\">Revoke</button></form></td></tr>\n",
                esc(&g.client),
                esc(&g.org),
                esc(&g.scopes),
                esc(&g.created),
                esc(&g.last_used),
                hidden("csrf", csrf),
                hidden("grant", &g.id),
                esc(&g.client)
            ));
        }
        body.push_str("</tbody>\n</table></div>\n");
    }
    body.push_str(&format!(
        "<form method=\"post\" action=\"/oauth/signout\">{}\
<div class=\"actions\"><button type=\"submit\" class=\"secondary\">Sign out</button></div></form>\n",
        hidden("csrf", csrf)
    ));
    layout_wide("Connected applications", &body)
}
