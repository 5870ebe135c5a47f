//! The page every screen of lore's is (sign-in, consent, tokens, the app): one HTML document
//! with one inline stylesheet, no scripts, no third-party assets, labelled controls, visible
//! focus, and the response headers of a page (a restrictive Content-Security-Policy, no
//! framing, no caching). Pages are `maud` templates: a value put into one is escaped, and only
//! [`PreEscaped`] (which no page uses for a value) puts HTML in as it is.

use http::Response;
use maud::{DOCTYPE, Markup, PreEscaped, html};

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

/// The HTML document of every page: its head with `title`, the shared style plus `style`
/// (a constant of the code, never a value), then `body`.
pub fn document(title: &str, style: &'static str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) }
                style { (PreEscaped(STYLE)) (PreEscaped(style)) }
            }
            body { (body) }
        }
    }
    .into_string()
}

/// A whole page around `body`.
pub fn layout(title: &str, body: Markup) -> String {
    page(title, body, None)
}

/// A page for a table: a wider column.
pub fn layout_wide(title: &str, body: Markup) -> String {
    page(title, body, Some("wide"))
}

fn page(title: &str, body: Markup, class: Option<&str>) -> String {
    document(
        &format!("{title} · lore"),
        "",
        html! {
            main class=[class] {
                p.brand { "lore" }
                (body)
            }
        },
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
            html! { p { a href=(location) { "Continue" } } },
        ),
        set_cookie,
    );
    if let Ok(v) = http::HeaderValue::from_str(location) {
        response.headers_mut().insert(http::header::LOCATION, v);
    }
    response
}

/// The alert that says what went wrong, inside a page.
pub fn alert(message: &str) -> Markup {
    html! { p.alert role="alert" { (message) } }
}

/// A page that explains a failure and what to do.
pub fn error_page(status: u16, title: &str, message: &str) -> Response<Vec<u8>> {
    html(
        status,
        layout(
            title,
            html! {
                h1 { (title) }
                (alert(message))
                p.muted { "Close this window and start again from your application." }
            },
        ),
        None,
    )
}

/// A hidden form field.
pub fn hidden(name: &str, value: &str) -> Markup {
    html! { input type="hidden" name=(name) value=(value); }
}

#[cfg(test)]
mod tests {
    use maud::html;

    #[test]
    fn every_value_in_a_page_is_escaped() {
        let hostile = "\"><script>alert('x')</script>&";
        let page = super::layout(
            hostile,
            html! { p title=(hostile) { (hostile) } (super::hidden(hostile, hostile)) },
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains(hostile), "{page}");
        assert!(
            page.contains("&lt;script&gt;alert('x')&lt;/script&gt;&amp;"),
            "{page}"
        );
    }
}
