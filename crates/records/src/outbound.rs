//! What crosses a connection: the URL a call may reach (a path under the connection's base,
//! normalized the way servers read it) and the redaction of the credential in what comes
//! back. `connections::call` is the only way out, so operations, feed pulls and scripts all
//! pass through here.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

use lore_base::error::{LoreError, Result};

/// The URL for `path` under `base_url` (no trailing slash), or why the path may not be sent.
///
/// A path is sent only if it is already in its one canonical form (`canonical_route`): the
/// bytes that encoding its decoded text gives back, with no `.` or `..` segment and nothing a
/// lenient decoder could read as one. So what is sent is exactly what was checked, whatever
/// a server or proxy does to it (decoding once or many times, `%u` escapes, overlong UTF-8,
/// compatibility forms of `.` and `/`, trimmed spaces): no number of decoding rounds is
/// guessed. The URL it makes must then keep the base's scheme, host, port and path prefix.
pub fn target_url(base_url: &str, path: &str) -> Result<String> {
    let refuse = |why: &str| {
        LoreError::invalid(
            "path",
            format!(
                "{why}; give a path under the connection's base URL, such as /issues?state=open"
            ),
        )
    };
    if !(path.is_empty() || path.starts_with('/') || path.starts_with('?')) || path.contains("://")
    {
        return Err(refuse(
            "the path must start with / or ? (no scheme or host)",
        ));
    }
    if path.contains('#') {
        return Err(refuse("the path may not hold a fragment (#)"));
    }
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    canonical_route(route).map_err(|why| refuse(&why))?;
    if !query.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') {
        return Err(refuse(
            "the query may hold printable ASCII only (percent-encode the rest)",
        ));
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

/// Bytes a path may hold as they are (RFC 3986 `pchar` and `/`, without `%`).
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b)
}

/// Bytes whose percent-encoding a canonical path never holds: the unreserved ones (RFC 3986
/// says `%2E` and `.` are the same, so only `.` is canonical), `%` (a server that decodes
/// twice would read what `%25` starts as another byte) and controls.
fn never_encoded(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~%".contains(&b) || b.is_ascii_control()
}

/// Checks that `route` (a path without its query) is in its canonical form: every byte is
/// one a path may hold as it is, or `%XX` (upper-case hex) of a byte a path may hold encoded
/// (so `%2e`, `%2E`, `%25`, `%u002e`, `%00` are refused); what it decodes to is UTF-8 (no
/// overlong forms) without controls, unchanged by NFKC (no fullwidth or other compatibility
/// form of `.` or `/`), and no segment of it (split at `/` and `\`, as servers may; before a
/// `;` parameter; without surrounding white space) is made only of dots.
fn canonical_route(route: &str) -> std::result::Result<(), String> {
    let bytes = route.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |at: usize| {
                bytes
                    .get(at)
                    .filter(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(*h))
                    .and_then(|h| (*h as char).to_digit(16))
            };
            let (Some(h), Some(l)) = (hex(i + 1), hex(i + 2)) else {
                return Err(
                    "the path is not in canonical form: % must start %XX with two upper-case hex digits".into(),
                );
            };
            let byte = (h << 4 | l) as u8;
            if never_encoded(byte) {
                return Err(format!(
                    "the path is not in canonical form: %{byte:02X} encodes a byte that must be written as it is or not at all"
                ));
            }
            decoded.push(byte);
            i += 3;
            continue;
        }
        if !plain(b) {
            return Err(format!(
                "the path is not in canonical form: {:?} must be percent-encoded",
                b as char
            ));
        }
        decoded.push(b);
        i += 1;
    }
    let text = std::str::from_utf8(&decoded)
        .map_err(|_| "the path decodes to bytes that are not UTF-8".to_string())?;
    if text.chars().any(char::is_control) {
        return Err("the path decodes to control characters".into());
    }
    if !unicode_normalization::is_nfkc(text) {
        return Err(
            "the path holds a compatibility form of a character (such as a fullwidth dot); write the character itself".into(),
        );
    }
    let dots_only = text
        .split(['/', '\\'])
        .map(|segment| segment.split(';').next().unwrap_or_default().trim())
        .any(|segment| !segment.is_empty() && segment.chars().all(|c| c == '.'));
    if dots_only {
        return Err(
            "the path may not hold . or .. segments, in any form (it would leave the base URL)"
                .into(),
        );
    }
    Ok(())
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
/// JSON-escaped; and spelled out: its letters and digits in order, in any case, with anything
/// but letters and digits between them (a list of its characters, spaces or dashes between
/// them, UTF-16). What it cannot promise: a secret split into parts, transformed (hashed,
/// reversed, encrypted, compressed) or in an encoding not listed here is not recognised; the
/// call's answer then says it may hold the credential (`CallResult::may_hold_credential`).
/// Connections are for upstreams the org trusts with the credential.
pub struct Redactor {
    needles: Vec<String>,
    /// Each secret's letters and digits, lower-cased, where there are enough of them to be
    /// told from innocent text.
    skeletons: Vec<Vec<u8>>,
}

/// Letters and digits a secret needs for its spelled-out form to be looked for.
const MIN_SKELETON: usize = 12;

/// The most bytes between two letters of a spelled-out secret (`", "`, `\u0000`, markup).
const SKELETON_GAP: usize = 16;

impl Redactor {
    pub fn new(secrets: &[&str]) -> Self {
        let mut needles = Vec::new();
        let mut skeletons = Vec::new();
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            needles.extend(forms(secret));
            let skeleton: Vec<u8> = secret
                .bytes()
                .filter(u8::is_ascii_alphanumeric)
                .map(|b| b.to_ascii_lowercase())
                .collect();
            if skeleton.len() >= MIN_SKELETON {
                skeletons.push(skeleton);
            }
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
        Self { needles, skeletons }
    }

    /// `text` with every known form of the secrets replaced by `[redacted]`.
    pub fn scrub(&self, text: &str) -> String {
        self.scrub_counted(text).0
    }

    /// [`Redactor::scrub`], and how many forms it replaced.
    pub fn scrub_counted(&self, text: &str) -> (String, usize) {
        let mut out = text.to_string();
        let mut count = 0;
        for needle in &self.needles {
            let found = out.matches(needle.as_str()).count();
            if found > 0 {
                count += found;
                out = out.replace(needle.as_str(), "[redacted]");
            }
        }
        for skeleton in &self.skeletons {
            let (scrubbed, found) = scrub_spelled(&out, skeleton);
            out = scrubbed;
            count += found;
        }
        (out, count)
    }

    /// `text` (already scrubbed) cut to at most `max` bytes at a character boundary, without
    /// a tail that starts a form of a secret: a cut never shows part of one.
    pub fn cut(&self, text: &str, max: usize) -> String {
        let mut end = max.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut kept = &text[..end];
        let starts_form = |tail: &str| {
            tail.len() >= 4
                && (self.needles.iter().any(|n| n.starts_with(tail))
                    || self.skeletons.iter().any(|k| {
                        let letters: Vec<u8> = tail
                            .bytes()
                            .filter(u8::is_ascii_alphanumeric)
                            .map(|b| b.to_ascii_lowercase())
                            .collect();
                        letters.len() >= 4 && k.starts_with(&letters)
                    }))
        };
        let longest = self.needles.first().map_or(0, String::len).max(
            self.skeletons
                .iter()
                .map(|k| k.len() * (SKELETON_GAP + 1))
                .max()
                .unwrap_or(0),
        );
        let mut from = kept.len().saturating_sub(longest);
        while from < kept.len() {
            if kept.is_char_boundary(from) && starts_form(&kept[from..]) {
                kept = &kept[..from];
                break;
            }
            from += 1;
        }
        kept.to_string()
    }
}

/// `text` with every spelled-out occurrence of `skeleton` (its letters and digits in order,
/// any case, up to [`SKELETON_GAP`] other bytes between two of them) replaced, and how many.
fn scrub_spelled(text: &str, skeleton: &[u8]) -> (String, usize) {
    let bytes = text.as_bytes();
    // Where the spelled-out skeleton starting at `start` ends, if it does.
    let spelled_at = |start: usize| {
        let mut at = start;
        for (n, want) in skeleton.iter().enumerate() {
            if n > 0 {
                let mut gap = 0;
                while at < bytes.len() && !bytes[at].is_ascii_alphanumeric() {
                    at += 1;
                    gap += 1;
                    if gap > SKELETON_GAP {
                        return None;
                    }
                }
            }
            if bytes.get(at).map(u8::to_ascii_lowercase) != Some(*want) {
                return None;
            }
            at += 1;
        }
        Some(at)
    };
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].to_ascii_lowercase() == skeleton[0]
            && let Some(end) = spelled_at(i)
        {
            spans.push((i, end));
            i = end;
        } else {
            i += 1;
        }
    }
    if spans.is_empty() {
        return (text.to_string(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in &spans {
        out.push_str(&text[at..*start]);
        out.push_str("[redacted]");
        at = *end;
    }
    out.push_str(&text[at..]);
    (out, spans.len())
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
            "/files/my%20doc",
            "/%E4%BD%A0%E5%A5%BD",
            "/a%3Bb/c%3Dd",
            "/users/me@example.com",
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
            // Not canonical: a plain byte encoded, lower-case hex, a bare or doubled %.
            "/%41",
            "/%2e",
            "/a%2fb",
            "/%25",
            "/100%",
            "/%zz",
            // Lenient decoders: %u escapes, overlong UTF-8, compatibility dots, trimmed spaces.
            "/%u002e%u002e/admin",
            "/%c0%ae%c0%ae/admin",
            "/%C0%AE%C0%AE/admin",
            "/\u{ff0e}\u{ff0e}/admin",
            "/%EF%BC%8E%EF%BC%8E/admin",
            "/..%20/admin",
            "/%20../admin",
            "/%25252e%25252e/admin",
            "/.../admin",
            // Shapes of the same class: one dot leader (NFKC '.'), small full stop, a fullwidth
            // solidus, a Tomcat parameter after encoded dots, a tab.
            "/%E2%80%A4%E2%80%A4/admin",
            "/%EF%B9%92%EF%B9%92/admin",
            "/a%EF%BC%8F..%EF%BC%8Fadmin",
            "/..%3Bx/admin",
            "/..%09/admin",
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

    #[test]
    fn a_secret_spelled_out_is_redacted() {
        let secret = "sk_live_4f9a2c7e1b3d8f60";
        let r = Redactor::new(&[secret]);
        let chars: Vec<String> = secret.chars().map(|c| c.to_string()).collect();
        let utf16: String = secret.chars().flat_map(|c| [c, '\0']).collect();
        for echo in [
            serde_json::to_string(&chars).unwrap(),
            chars.join(" "),
            chars.join("-"),
            secret.to_ascii_uppercase(),
            utf16,
            chars.join("\", \""),
        ] {
            let body = format!("{{\"echo\":\"{echo}\"}}");
            let (out, n) = r.scrub_counted(&body);
            assert!(n > 0, "not redacted: {echo}");
            assert!(!out.to_ascii_lowercase().contains("4f9a2c7e"), "{out}");
        }
        // Its letters far apart are innocent text.
        let sparse: String = secret
            .chars()
            .map(|c| format!("{c}{}", " ".repeat(40)))
            .collect();
        assert_eq!(r.scrub_counted(&sparse).1, 0);
    }

    #[test]
    fn a_cut_never_shows_the_start_of_a_secret() {
        let secret = "sk_live_4f9a2c7e1b3d8f60";
        let r = Redactor::new(&[secret]);
        let padded = format!("{}{secret}", "x".repeat(100));
        for at in 100..padded.len() {
            let cut = r.cut(&padded, at);
            assert!(cut.len() <= at);
            assert!(!cut.contains("sk_l"), "cut at {at}: {cut}");
        }
    }
}
