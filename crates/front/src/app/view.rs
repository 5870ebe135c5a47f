//! The app's page frame: the org, its sections, who is signed in (with sign-out), and the
//! styles of the web kit's page plus the app's own, in `maud` templates (every value escaped).

use http::Response;
use maud::{Markup, html};

use super::context::App;
use crate::web::page;

const APP_STYLE: &str = "\
body{background:var(--bg)}
header.bar{display:flex;flex-wrap:wrap;gap:.5rem 1.25rem;align-items:center;padding:.75rem 1.25rem;background:var(--card);border-bottom:1px solid var(--line)}
header.bar .brand{margin:0}
header.bar nav{display:flex;gap:1rem;flex-wrap:wrap}
header.bar nav a{color:var(--fg);text-decoration:none;padding:.2rem 0;border-bottom:2px solid transparent}
header.bar nav a[aria-current=page]{border-bottom-color:var(--accent);font-weight:600}
header.bar .who{margin-left:auto;display:flex;gap:.75rem;align-items:center;color:var(--muted);font-size:.92rem}
header.bar .who form{margin:0}
header.bar .who button{padding:.3rem .7rem;font-size:.9rem}
main.app{max-width:64rem;margin:1.5rem auto;padding:0 1.25rem;background:transparent;border:0}
.filters{display:grid;grid-template-columns:repeat(auto-fit,minmax(10rem,1fr));gap:.5rem 1rem;align-items:end;margin:0 0 1.25rem}
.filters label{margin:0 0 .2rem;font-size:.9rem}
.filters .q{grid-column:1/-1}
.filters input,.filters select{width:100%;padding:.5rem .6rem;font:inherit;color:inherit;background:var(--card);border:1px solid var(--line);border-radius:6px}
.filters .check{display:flex;gap:.4rem;align-items:center;font-weight:400}
.filters .check input{width:auto}
ol.memories{list-style:none;padding:0;margin:0}
ol.memories li,.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:.8rem 1rem;margin:0 0 .75rem}
.memory-text{white-space:pre-wrap;overflow-wrap:anywhere;margin:.2rem 0 .4rem}
.meta{color:var(--muted);font-size:.88rem;display:flex;flex-wrap:wrap;gap:.25rem .9rem}
.tag{display:inline-block;border:1px solid var(--line);border-radius:999px;padding:0 .55rem;font-size:.8rem}
.old{opacity:.8}
.old .memory-text{text-decoration:line-through;text-decoration-color:var(--muted)}
.current{border-color:var(--accent)}
textarea{width:100%;min-height:6rem;padding:.6rem .7rem;font:inherit;color:inherit;background:transparent;border:1px solid var(--line);border-radius:6px}
.pager{display:flex;justify-content:space-between;margin:1rem 0}
.tag.bad{border-color:var(--danger);color:var(--danger)}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:0 0 1rem}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
pre.card{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.88rem}
svg.chart{display:block;width:100%;height:10rem;background:var(--card);border:1px solid var(--line);border-radius:8px}
svg.spark{display:block;width:10rem;height:1.5rem;border-bottom:1px solid var(--line)}
main.app a{color:var(--accent)}
td.name code{word-break:normal;white-space:nowrap}
code.id{display:block}
svg rect.calls{fill:var(--accent)}
svg rect.errs{fill:var(--danger)}
svg rect.caps{fill:#b7791f}
.legend{display:flex;gap:1rem;margin:.3rem 0;font-size:.88rem;color:var(--muted)}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-.1rem;border-radius:2px}
.legend i.calls{background:var(--accent)}.legend i.errs{background:var(--danger)}.legend i.caps{background:#b7791f}
.axis{display:flex;justify-content:space-between;gap:1rem;margin:.2rem 0 1rem}
.periods{display:flex;gap:.75rem;margin:0 0 1rem}
h3{font-size:1.05rem;margin:0 0 .3rem}
section.card{margin:0 0 1rem}
td.props span{display:inline-block;margin:0 .8rem .1rem 0;overflow-wrap:anywhere}
td.props b{font-weight:600;color:var(--muted)}
td.value{overflow-wrap:anywhere;white-space:pre-wrap}
svg.graph{display:block;width:100%;max-width:40rem;height:auto;margin:.5rem 0 1rem;background:var(--card);border:1px solid var(--line);border-radius:10px}
svg.graph line{stroke:var(--muted);stroke-width:1.2}
svg.graph marker path{fill:var(--muted)}
svg.graph rect.node{fill:var(--bg);stroke:var(--accent);stroke-width:1.2}
svg.graph rect.center{fill:var(--accent)}
svg.graph text{font:12px system-ui,sans-serif;fill:var(--fg);text-anchor:middle}
svg.graph text.type{font-size:10px;fill:var(--muted)}
svg.graph text.edge{font-size:10px;fill:var(--muted)}
svg.graph text.center{fill:var(--accent-fg);font-weight:600;font-size:13px}
svg.graph a:focus-visible rect{stroke-width:3}
.notice{border-left:4px solid var(--accent);padding:.5rem .75rem;margin:1rem 0;background:var(--card)}
@media (max-width:40rem){header.bar .who{margin-left:0;width:100%}main.app{padding:0 .75rem}svg.spark{width:5rem}code.id{display:none}}
";

/// The app's sections, in the order the bar shows them.
const SECTIONS: &[(&str, &str)] = &[
    ("memory", "Memory"),
    ("records", "Records"),
    ("actions", "Actions"),
    ("usage", "Usage"),
    ("access", "Access"),
];

/// A whole app page: the bar, then `body` under the heading `title`.
pub fn page(app: &App<'_>, section: &str, title: &str, body: Markup) -> Response<Vec<u8>> {
    let org = app.org();
    let html = page::document(
        &format!("{title} · {org} · lore"),
        APP_STYLE,
        html! {
            header.bar {
                p.brand { "lore · " (org) }
                nav aria-label="Sections" {
                    @for (slug, name) in SECTIONS {
                        a href={ "/app/" (org) "/" (slug) } aria-current=[(*slug == section).then_some("page")] { (name) }
                    }
                }
                div.who {
                    span { (app.user) " (" (app.caller.role().as_str()) ")" }
                    form method="post" action="/oauth/signout" {
                        (page::hidden("csrf", &app.session.record.csrf))
                        button.secondary type="submit" { "Sign out" }
                    }
                }
            }
            main.app {
                h1 { (title) }
                (body)
            }
        },
    );
    page::html(200, html, None)
}

/// An error page outside any org's frame (nothing of the org is shown).
pub fn page_error(status: u16, title: &str, message: &str) -> Response<Vec<u8>> {
    page::html(
        status,
        page::layout(title, html! { h1 { (title) } (page::alert(message)) }),
        None,
    )
}

/// A time as the app shows it (UTC, to the minute), from the RFC 3339 text the SDK returns.
pub fn when(text: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(text).map_or_else(
        |_| text.to_string(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// The pager under a list: "Newest" back to the first page when this one came from a cursor,
/// and `older` ("Older …") when the SDK returned a next cursor. `here` is the page's query
/// string with the cursor given (or none); nothing when there is only one page.
pub fn pager(
    here: impl Fn(Option<&str>) -> String,
    from_cursor: bool,
    next: Option<&str>,
    older: &str,
) -> Markup {
    if next.is_none() && !from_cursor {
        return html! {};
    }
    html! {
        nav.pager aria-label="Pages" {
            @if from_cursor { a href={ "?" (here(None)) } { "Newest" } } @else { span {} }
            @if let Some(c) = next { a href={ "?" (here(Some(c))) } rel="next" { (older) } }
        }
    }
}

/// A principal as the pages show it: the member's name with the id as a hover title, or the
/// id of someone no longer a member.
pub fn who(names: &std::collections::HashMap<String, String>, id: &str) -> Markup {
    html! {
        @match names.get(id) {
            Some(name) => span title=(id) { (name) },
            None => code { (id) },
        }
    }
}

/// A time as the app shows it, from milliseconds since the epoch.
pub fn when_ms(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
}

/// An error the engine answered, as an alert in the page.
pub fn alert(e: &lore_base::error::LoreError) -> Markup {
    page::alert(&for_people(e))
}

/// An error as a person reads it: the SDK's own message (it says what to change), except for
/// the server's internal failures, whose text (storage and engine details) goes to the log only.
pub fn for_people(e: &lore_base::error::LoreError) -> String {
    if e.http_status() >= 500 && !matches!(e.code(), "overloaded" | "upstream_error") {
        tracing::warn!(error = %e, "the app could not answer");
        return "Something went wrong on the server (its log has the details); try again in a moment.".into();
    }
    e.to_string()
}

/// The 403 page for a change the person's role does not allow, in the org's frame.
pub fn forbidden(app: &App<'_>, section: &str, message: &str) -> Response<Vec<u8>> {
    let told = format!(
        "You are a {} of this org. {message}",
        app.caller.role().as_str()
    );
    let mut r = page(app, section, "Not allowed", page::alert(&told));
    *r.status_mut() = http::StatusCode::FORBIDDEN;
    r
}

/// The answer for an org that does not exist and for one the person is not a member of alike.
pub fn not_found() -> Response<Vec<u8>> {
    page_error(
        404,
        "Not found",
        "There is no such page, or you are not a member of this org.",
    )
}

#[cfg(test)]
mod tests {
    use lore_base::error::LoreError;
    use lore_base::storage::StorageError;

    #[test]
    fn people_read_the_sdks_messages_and_never_the_servers_internals() {
        for internal in [
            LoreError::Internal("decoding o/acme/ent/01J…: trailing bytes".into()),
            LoreError::Storage(StorageError::Backend(
                "disk I/O error at /var/lib/lore".into(),
            )),
        ] {
            let shown = super::for_people(&internal);
            assert!(shown.starts_with("Something went wrong"), "{shown}");
            assert!(!shown.contains("o/acme") && !shown.contains("/var/lib"));
        }
        let told = super::for_people(&LoreError::invalid("limit", "use 1 to 100"));
        assert!(told.contains("use 1 to 100"), "{told}");
        let busy = super::for_people(&LoreError::Overloaded("4 scripts run in org acme".into()));
        assert!(busy.contains("4 scripts"), "{busy}");
    }
}
