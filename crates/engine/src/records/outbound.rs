//! What crosses a connection: the URL a call may reach (a path under the connection's base,
//! normalized the way servers read it) and the redaction of the credential in what comes
//! back. `connections::call` is the only way out, so operations, feed pulls and scripts all
//! pass through here.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

use lore_base::error::{LoreError, Result};

/// How many rounds of percent-decoding a path is checked under: servers and proxies that
/// decode twice (or three times) see `%252e%252e` as `..`.
const DECODE_ROUNDS: usize = 3;

/// The URL for `path` under `base_url` (no trailing slash), or why the path may not be sent.
///
/// A path may hold no `.` or `..` segment in any form a server may read as one: as written,
/// percent-encoded (`%2e%2e`, `%2E.`), encoded again (`%252e`), with `\` or an encoded slash
/// (`%2f`, `%5c`) as the separator, or with a `;` parameter (`..;`). Such a path is refused
/// rather than resolved, so what is sent is exactly what was checked. The URL it makes must
/// then keep the base's scheme, host, port and path prefix.
pub fn target_url(base_url: &str, path: &str) -> Result<String> {
    let refuse = |why: &str| {
        LoreError::invalid(
            "path",
            format!(
                "{why}; give a path under the connection's base URL, such as /issues?state=open"
            ),
        )
    };
    if !(path.is_empty() || path.starts_with('/') || path.starts_with('?'))
        || path.contains("://")
        || path.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(refuse(
            "the path must start with / or ? (no scheme or host)",
        ));
    }
    if path.contains('#') {
        return Err(refuse("the path may not hold a fragment (#)"));
    }
    let (route, _query) = path.split_once('?').unwrap_or((path, ""));
    let mut form = route.as_bytes().to_vec();
    for _ in 0..=DECODE_ROUNDS {
        if form.iter().any(|b| b.is_ascii_control()) {
            return Err(refuse("the path decodes to control characters"));
        }
        let dot_segment = form
            .split(|b| *b == b'/' || *b == b'\\')
            .map(|segment| segment.split(|b| *b == b';').next().unwrap_or(&[]))
            .any(|segment| segment == b"." || segment == b"..");
        if dot_segment {
            return Err(refuse(
                "the path may not hold . or .. segments, in any encoding (it would leave the base URL)",
            ));
        }
        match percent_decode(&form) {
            Some(decoded) if decoded != form => form = decoded,
            _ => break,
        }
    }
    let url = format!("{base_url}{path}");
    let (base, full) = match (url::Url::parse(base_url), url::Url::parse(&url)) {
        (Ok(b), Ok(f)) => (b, f),
        _ => return Err(refuse("the path does not make a valid URL")),
    };
    let base_path = base.path().trim_end_matches('/');
    let under_base = full.path() == base_path
        || full.path().starts_with(&format!("{base_path}/"))
        || (base_path.is_empty() && full.path().starts_with('/'));
    if full.scheme() != base.scheme()
        || full.host_str() != base.host_str()
        || full.port_or_known_default() != base.port_or_known_default()
        || !under_base
    {
        return Err(refuse("the URL leaves the connection's base URL"));
    }
    Ok(url)
}

/// One round of percent-decoding (`%XX` with hex digits; anything else kept as it is); `None`
/// when nothing was encoded.
fn percent_decode(bytes: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h << 4 | l);
            changed = true;
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// Encodings shorter than this are not redacted: a core of a few characters would also
/// match innocent text.
const MIN_ENCODED: usize = 8;

/// The forms of a credential that an upstream echoing a request can send back, and their
/// removal from what the caller sees.
///
/// Each secret (the stored secret, and the whole header value it travels in, such as
/// `Bearer <secret>`) is redacted as written; percent-encoded (only reserved bytes, or every
/// byte; upper- or lower-case hex; `+` for spaces); in base64 (standard and URL-safe, padded or
/// not, at each of the three alignments it can have inside a longer encoded text); in hex;
/// and JSON-escaped. What it cannot promise: a secret split into parts, transformed (hashed,
/// reversed, encrypted, compressed), wrapped across lines, or in an encoding not listed
/// here is not recognised. Connections are for upstreams the org trusts with the credential.
pub struct Redactor {
    needles: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: &[&str]) -> Self {
        let mut needles = Vec::new();
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            needles.extend(forms(secret));
        }
        // Each form as it reads inside a JSON string too (an upstream that echoes a request as
        // JSON escapes its backslashes and quotes).
        let escaped: Vec<String> = needles
            .iter()
            .filter_map(|n| serde_json::to_string(n).ok())
            .map(|j| j[1..j.len() - 1].to_string())
            .collect();
        needles.extend(escaped);
        needles.retain(|n| !n.is_empty());
        // Longest first, so a form containing another is replaced whole.
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Self { needles }
    }

    /// `text` with every known form of the secrets replaced by `[redacted]`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), "[redacted]");
            }
        }
        out
    }
}

/// Every form of `secret` that [`Redactor`] looks for.
fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut out = vec![secret.to_string()];
    let encoded_all = |upper: bool| {
        bytes
            .iter()
            .map(|b| {
                if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect::<String>()
    };
    let encoded_reserved = |upper: bool| {
        bytes
            .iter()
            .map(|&b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect::<String>()
    };
    for upper in [true, false] {
        out.push(encoded_reserved(upper));
        out.push(encoded_all(upper));
    }
    out.push(url::form_urlencoded::byte_serialize(bytes).collect());
    if bytes.len() * 2 >= MIN_ENCODED {
        let hex = lore_base::keys::to_hex(bytes);
        out.push(hex.to_ascii_uppercase());
        out.push(hex);
    }
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        for offset in 0..3usize {
            // The characters of an encoding that depend on the secret's bytes alone, whatever
            // comes before and after it in the encoded text.
            let mut padded = vec![0u8; offset];
            padded.extend_from_slice(bytes);
            let text = engine.encode(&padded);
            let first = (8 * offset).div_ceil(6);
            let last = (8 * (offset + bytes.len())) / 6;
            if last > first && last - first >= MIN_ENCODED {
                out.push(text[first..last].to_string());
            }
        }
        // The whole value encoded on its own, with its own padding.
        let whole = engine.encode(bytes);
        if whole.len() >= MIN_ENCODED {
            out.push(whole);
        }
    }
    if let Ok(json) = serde_json::to_string(secret) {
        let inner = json[1..json.len() - 1].to_string();
        out.push(inner.replace('/', "\\/"));
        out.push(inner);
    }
    for upper in [true, false] {
        let escaped: String = secret
            .encode_utf16()
            .map(|u| {
                if upper {
                    format!("\\u{u:04X}")
                } else {
                    format!("\\u{u:04x}")
                }
            })
            .collect();
        out.push(escaped);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://api.example.com/v1";

    #[test]
    fn paths_under_the_base_are_sent_as_written() {
        for path in [
            "",
            "/issues",
            "/issues?state=open&q=a/../b",
            "?page=2",
            "/a/b.json",
            "/a..b/c.",
            "/%41",
        ] {
            assert_eq!(
                target_url(BASE, path).unwrap(),
                format!("{BASE}{path}"),
                "{path}"
            );
        }
    }

    #[test]
    fn dot_segments_in_every_encoding_are_refused() {
        for path in [
            "/..",
            "/../admin",
            "/a/../../admin",
            "/./x",
            "/%2e%2e/admin",
            "/%2E%2e/admin",
            "/.%2e/admin",
            "/%252e%252e/admin",
            "/%25252e%25252e/admin",
            "/..%2fadmin",
            "/..%2Fadmin",
            "/a%2f..%2f..%2fadmin",
            "/..\\admin",
            "/a\\..\\..",
            "/..%5cadmin",
            "/..;/admin",
            "/%2e%2e;x/admin",
            "/x/..",
            "/x/.%00",
            "#frag",
            "/a#b",
            "http://evil.example/",
            " /x",
        ] {
            assert!(target_url(BASE, path).is_err(), "{path} must be refused");
        }
    }

    #[test]
    fn a_url_that_leaves_the_base_path_is_refused() {
        assert!(target_url("https://h.example/api", "/../x").is_err());
        // `//evil` under a base with a path stays on the host but is a different path prefix.
        assert!(target_url("https://h.example", "/ok").is_ok());
        assert!(target_url("https://h.example/api", "xyz").is_err());
    }

    #[test]
    fn every_common_encoding_of_the_secret_is_redacted() {
        let secret = "s3cr3t/t0ken+value";
        let header = format!("Bearer {secret}");
        let r = Redactor::new(&[secret, &header]);
        let echoes = [
            secret.to_string(),
            header.clone(),
            STANDARD.encode(secret),
            STANDARD.encode(&header),
            URL_SAFE_NO_PAD.encode(secret),
            STANDARD.encode(format!("x{secret}")),
            STANDARD.encode(format!("xy{secret}yz")),
            STANDARD.encode(format!("{{\"authorization\":\"{header}\"}}")),
            url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
            secret.bytes().map(|b| format!("%{b:02x}")).collect(),
            secret.bytes().map(|b| format!("{b:02X}")).collect(),
            serde_json::to_string(secret).unwrap().replace('/', "\\/"),
            secret
                .encode_utf16()
                .map(|u| format!("\\u{u:04x}"))
                .collect(),
        ];
        for echo in echoes {
            let body = format!("{{\"echo\":\"{echo}\"}}");
            let out = r.scrub(&body);
            assert!(!out.contains(&echo), "not redacted: {echo} in {out}");
            assert!(out.contains("[redacted]"), "{out}");
        }
        assert_eq!(r.scrub("nothing secret here"), "nothing secret here");
    }
}
