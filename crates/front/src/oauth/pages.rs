//! The OAuth pages: sign-in, consent and the token page, in the web kit's page
//! (`crate::web::page`).

use maud::html;

use crate::web::page::{alert, hidden, layout, layout_wide};

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
    let body = html! {
        h1 { "Sign in to lore" }
        @if let Some(name) = page.client_name {
            p { strong { (name) } " wants to connect to your lore account. Sign in to continue." }
        }
        @if let Some(error) = page.error { (alert(error)) }
        @for (id, label) in page.providers {
            form method="post" action="/oauth/upstream/start" {
                (hidden("csrf", page.csrf)) (hidden("then", page.then)) (hidden("provider", id))
                button.button.secondary type="submit" { "Continue with " (label) }
            }
        }
        @if page.password {
            @if !page.providers.is_empty() { p.or { "or, as the server's owner" } }
            form method="post" action="/oauth/signin" {
                (hidden("csrf", page.csrf)) (hidden("then", page.then))
                input type="text" name="username" value="owner" autocomplete="username" hidden aria-hidden="true" tabindex="-1";
                label for="password" { "Owner password" }
                input #password name="password" type="password" autocomplete="current-password" required autofocus;
                p.muted { "The password set with " code { "lore init" } "." }
                div.actions { button.primary type="submit" { "Sign in" } }
            }
        }
        @if !page.password && page.providers.is_empty() {
            p.alert role="alert" {
                "No way to sign in is configured on this server: set an owner password with "
                code { "lore init" } ", or configure an identity provider."
            }
        }
    };
    layout("Sign in", body)
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
    let body = html! {
        h1 { "Allow " (page.client_name) " to use lore?" }
        p {
            strong { (page.client_name) } " is asking to act as " strong { (page.user) }
            " through lore's MCP tools."
        }
        p.muted {
            "Client " code { (page.client_id) } "; after you answer you return to "
            code { (page.redirect_host) } "."
        }
        form method="post" action="/oauth/consent" {
            (hidden("csrf", page.csrf)) (hidden("request", page.request))
            @if page.orgs.is_empty() {
                p.alert role="alert" {
                    "You are not a member of any org on this server yet. Ask an org admin to invite you, then connect again."
                }
                div.actions { button.secondary type="submit" name="decision" value="deny" { "Cancel" } }
            } @else {
                fieldset {
                    legend { "Organization" }
                    @for (i, org) in page.orgs.iter().enumerate() {
                        label.choice {
                            input type="radio" name="org" value=(org.name) checked[i == 0];
                            span { (org.name) " " small { "your role: " (org.role) } }
                        }
                    }
                    @if page.pinned_org.is_some() {
                        p.muted { "The application asked for this org only." }
                    }
                }
                fieldset {
                    legend { "Permissions" }
                    label.choice {
                        input type="checkbox" name="scope" value="mcp:read" checked disabled;
                        span { "Read " small { "search memory and read the org's records (mcp:read)" } }
                    }
                    input type="hidden" name="scope" value="mcp:read";
                    @if page.write_requested {
                        label.choice {
                            input type="checkbox" name="scope" value="mcp:write" checked;
                            span { "Write " small { "save memories and change records, within your role (mcp:write)" } }
                        }
                    }
                }
                div.actions {
                    button.primary type="submit" name="decision" value="approve" { "Allow" }
                    button.secondary type="submit" name="decision" value="deny" { "Deny" }
                }
            }
        }
    };
    layout("Allow access", body)
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
    let body = html! {
        h1 { "Connected applications" }
        p { "Signed in as " strong { (user) } "." }
        @if let Some(n) = notice { p role="status" { (n) } }
        @if grants.is_empty() {
            p.muted { "No application holds a token of yours." }
        } @else {
            div.scroll { table {
                caption.muted { "Applications you allowed, and what they may do" }
                thead { tr {
                    th scope="col" { "Application" } th scope="col" { "Org" } th scope="col" { "Scopes" }
                    th scope="col" { "Allowed" } th scope="col" { "Last refreshed" }
                    th scope="col" { span.muted { "Action" } }
                } }
                tbody {
                    @for g in grants {
                        tr {
                            td { (g.client) } td { (g.org) } td { (g.scopes) }
                            td.when { (g.created) } td.when { (g.last_used) }
                            td { form method="post" action="/oauth/tokens/revoke" {
                                (hidden("csrf", csrf)) (hidden("grant", &g.id))
                                button.danger type="submit" aria-label={ "Revoke access of " (g.client) } { "Revoke" }
                            } }
                        }
                    }
                }
            } }
        }
        form method="post" action="/oauth/signout" {
            (hidden("csrf", csrf))
            div.actions { button.secondary type="submit" { "Sign out" } }
        }
    };
    layout_wide("Connected applications", body)
}
