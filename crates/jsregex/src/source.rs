//! Pattern source preparation: UTF-16 to the UTF-8 text oxc parses (lone surrogates, and
//! workarounds for two oxc 0.146 gaps), the nesting pre-check, and group-name values.

use std::sync::OnceLock;

use crate::charset::CharSet;

/// Converts the UTF-16 source to UTF-8 for oxc. Lone surrogates become `\uXXXX` escapes
/// (`\u{XXXX}` in Unicode mode, where `\uXXXX\uYYYY` would pair up); a lone surrogate after
/// an unescaped backslash is an identity escape of that code unit in non-Unicode mode (and a
/// SyntaxError in Unicode mode, where only syntax characters may be identity-escaped).
pub(crate) fn source_text(pattern: &[u16], unicode: bool) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut backslashes = 0usize;
    let mut i = 0;
    while i < pattern.len() {
        let u = pattern[i];
        let is_lead = (0xD800..0xDC00).contains(&u);
        if is_lead && i + 1 < pattern.len() && (0xDC00..0xE000).contains(&pattern[i + 1]) {
            let cp =
                0x10000 + ((u32::from(u) - 0xD800) << 10) + (u32::from(pattern[i + 1]) - 0xDC00);
            out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
            backslashes = 0;
            i += 2;
            continue;
        }
        if (0xD800..0xE000).contains(&u) {
            if backslashes % 2 == 1 {
                if unicode {
                    return Err("invalid escape of a lone surrogate".to_string());
                }
                out.pop();
            }
            if unicode {
                out.push_str(&format!("\\u{{{u:04X}}}"));
            } else {
                out.push_str(&format!("\\u{u:04X}"));
            }
            backslashes = 0;
            i += 1;
            continue;
        }
        let c = char::from_u32(u32::from(u)).unwrap_or('\u{FFFD}');
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        out.push(c);
        i += 1;
    }
    Ok(out)
}

/// Rewrites Annex B's `\c` inside non-Unicode classes, which oxc 0.146 gets wrong: `\cD`
/// (a digit) and `\c_` are the control character (D mod 32) written as `\xHH`, and `\c-`
/// is a literal backslash followed by `c-` (ClassControlLetter does not include `-`).
pub(crate) fn fix_class_controls(pattern: &[u16]) -> Vec<u16> {
    let (bs, c) = (u16::from(b'\\'), u16::from(b'c'));
    let mut out = Vec::with_capacity(pattern.len());
    let mut in_class = false;
    let mut i = 0;
    while i < pattern.len() {
        let u = pattern[i];
        if u == bs && i + 1 < pattern.len() {
            if in_class && pattern[i + 1] == c && i + 2 < pattern.len() {
                let d = pattern[i + 2];
                if d == u16::from(b'_') || (u16::from(b'0')..=u16::from(b'9')).contains(&d) {
                    out.extend(format!("\\x{:02X}", d % 32).encode_utf16());
                    i += 3;
                    continue;
                }
                if d == u16::from(b'-') {
                    out.extend([bs, bs, c]);
                    i += 2;
                    continue;
                }
            }
            out.extend([u, pattern[i + 1]]);
            i += 2;
            continue;
        }
        if !in_class && u == u16::from(b'[') {
            in_class = true;
        } else if in_class && u == u16::from(b']') {
            in_class = false;
        }
        out.push(u);
        i += 1;
    }
    out
}

/// The deepest nesting of groups and classes, found without parsing (so that the parser's
/// own recursion is never asked to go deep).
pub(crate) fn nesting_depth(pattern: &[u16], vmode: bool) -> usize {
    let (mut depth, mut max, mut class) = (0usize, 0usize, 0usize);
    let mut i = 0;
    while i < pattern.len() {
        let u = pattern[i];
        if u == u16::from(b'\\') {
            i += 2;
            continue;
        }
        if class > 0 {
            if u == u16::from(b'[') && vmode {
                class += 1;
                depth += 1;
            } else if u == u16::from(b']') {
                class -= 1;
                depth = depth.saturating_sub(1);
            }
        } else if u == u16::from(b'[') {
            class = 1;
            depth += 1;
        } else if u == u16::from(b'(') {
            depth += 1;
        } else if u == u16::from(b')') {
            depth = depth.saturating_sub(1);
        }
        max = max.max(depth);
        i += 1;
    }
    max
}

/// The pattern for error messages: lossy, at most 100 characters.
pub(crate) fn display_source(pattern: &[u16]) -> String {
    let s: String = char::decode_utf16(pattern.iter().copied())
        .map(|r| r.unwrap_or('\u{FFFD}'))
        .collect();
    if s.chars().count() > 100 {
        let mut t: String = s.chars().take(100).collect();
        t.push('…');
        t
    } else {
        s
    }
}

/// A group name's StringValue: oxc keeps the source text, where `\uXXXX`, `\u{X}` and
/// `\uLEAD\uTRAIL` escapes may stand for characters.
pub(crate) fn group_name(source: &str) -> String {
    if !source.contains('\\') {
        return source.to_string();
    }
    let mut units: Vec<u16> = Vec::with_capacity(source.len());
    let mut rest = source;
    while let Some(i) = rest.find("\\u") {
        units.extend(rest[..i].encode_utf16());
        rest = &rest[i + 2..];
        let (value, used) = if let Some(body) = rest.strip_prefix('{') {
            let end = body.find('}').unwrap_or(body.len());
            (
                u32::from_str_radix(&body[..end], 16).unwrap_or(0xFFFD),
                end + 2,
            )
        } else {
            (
                u32::from_str_radix(rest.get(..4).unwrap_or("FFFD"), 16).unwrap_or(0xFFFD),
                4,
            )
        };
        rest = rest.get(used..).unwrap_or("");
        match char::from_u32(value) {
            Some(c) => units.extend(c.encode_utf16(&mut [0; 2]).iter()),
            None => units.push(value as u16),
        }
    }
    units.extend(rest.encode_utf16());
    String::from_utf16_lossy(&units)
}

/// Rewrites quantifier bounds too large for oxc 0.146 (which rejects any above 2^53 - 1; the
/// spec has no limit) as 2^53 - 1. No input is that long, so the matches are the same;
/// `{n,m}` with both bounds that large and `n > m` is left for oxc to reject.
pub(crate) fn clamp_quantifiers(text: &str, vmode: bool) -> String {
    fn digits(s: &str) -> usize {
        s.bytes().take_while(u8::is_ascii_digit).count()
    }
    fn numeric(d: &str) -> &str {
        let t = d.trim_start_matches('0');
        if t.is_empty() { "0" } else { t }
    }
    fn big(d: &str) -> bool {
        d.parse::<u64>().map_or(true, |v| v > 9_007_199_254_740_991)
    }
    fn clamp(d: &str) -> &str {
        if big(d) { "9007199254740991" } else { d }
    }
    let mut out = String::with_capacity(text.len());
    let (mut class, mut i) = (0usize, 0usize);
    while i < text.len() {
        let rest = &text[i..];
        let c = rest.chars().next().unwrap_or(' ');
        if c == '\\' {
            out.push(c);
            i += 1;
            if let Some(n) = text[i..].chars().next() {
                out.push(n);
                i += n.len_utf8();
            }
            continue;
        }
        if c == '{' && class == 0 {
            let a = digits(&rest[1..]);
            let after_a = &rest[1 + a..];
            let (b, tail) = match after_a.strip_prefix(',') {
                Some(t) => {
                    let b = digits(t);
                    (Some(&t[..b]), &t[b..])
                }
                None => (None, after_a),
            };
            if a > 0 && tail.starts_with('}') {
                let (da, db) = (&rest[1..1 + a], b.unwrap_or(""));
                let (na, nb) = (numeric(da), numeric(db));
                let reversed = !db.is_empty() && (na.len(), na) > (nb.len(), nb);
                if (big(da) || (!db.is_empty() && big(db))) && !reversed {
                    out.push('{');
                    out.push_str(clamp(da));
                    if b.is_some() {
                        out.push(',');
                        out.push_str(if db.is_empty() { "" } else { clamp(db) });
                    }
                    out.push('}');
                    i += rest.len() - tail.len() + 1;
                    continue;
                }
            }
        }
        if c == '[' && (class == 0 || vmode) {
            class += 1;
        } else if c == ']' && class > 0 {
            class -= 1;
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Characters a group name may contain (ID_Continue, `$`, ZWNJ, ZWJ).
fn name_chars() -> &'static CharSet {
    static SET: OnceLock<CharSet> = OnceLock::new();
    SET.get_or_init(|| {
        crate::charset::property("ID_Continue", None)
            .unwrap_or_default()
            .union(&CharSet::from_ranges(vec![(0x24, 0x24), (0x200C, 0x200D)]))
    })
}

/// Decodes a `\u` escape at the start of `s` (after the backslash): `u{X}`, `uXXXX`, or
/// `uLEAD\uTRAIL`; the code point and the bytes used.
fn name_escape(s: &str) -> Option<(u32, usize)> {
    let body = s.strip_prefix('u')?;
    if let Some(inner) = body.strip_prefix('{') {
        let end = inner.find('}')?;
        return Some((u32::from_str_radix(&inner[..end], 16).ok()?, end + 3));
    }
    fn hex(t: &str) -> Option<&str> {
        t.get(..4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    }
    let v = u32::from_str_radix(hex(body)?, 16).ok()?;
    if (0xD800..0xDC00).contains(&v)
        && let Some(t) = body[4..].strip_prefix("\\u").and_then(hex)
    {
        let w = u32::from_str_radix(t, 16).ok()?;
        if (0xDC00..0xE000).contains(&w) {
            return Some((0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00), 11));
        }
    }
    Some((v, 5))
}

/// Writes escaped characters in group names (`(?<name>` and `\k<name>`) as themselves, when
/// they are characters a name may hold: oxc 0.146 compares names by their source text, so
/// `(?<\u0061>.)\k<a>` would be rejected. Escapes of anything else are left for oxc to reject.
pub(crate) fn normalize_names(text: &str, vmode: bool) -> String {
    if !text.contains("\\u") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let (mut class, mut i) = (0usize, 0usize);
    let bytes = text.as_bytes();
    while i < text.len() {
        let rest = &text[i..];
        let group =
            rest.starts_with("(?<") && !rest.starts_with("(?<=") && !rest.starts_with("(?<!");
        if class == 0 && (group || rest.starts_with("\\k<")) {
            let skip = 3;
            out.push_str(&rest[..skip]);
            i += skip;
            while i < text.len() && bytes[i] != b'>' {
                let r = &text[i..];
                if let Some((cp, used)) = r.strip_prefix('\\').and_then(name_escape)
                    && let Some(c) = char::from_u32(cp).filter(|&c| name_chars().contains(c as u32))
                {
                    out.push(c);
                    i += used + 1;
                    continue;
                }
                let c = r.chars().next().unwrap_or('>');
                out.push(c);
                i += c.len_utf8();
            }
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if c == '\\' {
            out.push(c);
            i += 1;
            if let Some(n) = text[i..].chars().next() {
                out.push(n);
                i += n.len_utf8();
            }
            continue;
        }
        if c == '[' && (class == 0 || vmode) {
            class += 1;
        } else if c == ']' && class > 0 {
            class -= 1;
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    #[test]
    fn source_text_escapes_lone_surrogates() {
        assert_eq!(
            source_text(&[0x61, 0xD83D, 0x62], false).unwrap(),
            "a\\uD83Db"
        );
        assert_eq!(source_text(&[0xD83D, 0xDE00], false).unwrap(), "😀");
        assert_eq!(source_text(&[0xDE00], true).unwrap(), "\\u{DE00}");
        // `\` + lone surrogate: identity escape in non-u mode, an error in u mode.
        assert_eq!(source_text(&[0x5C, 0xD800], false).unwrap(), "\\uD800");
        assert!(source_text(&[0x5C, 0xD800], true).is_err());
        // `\\` + lone surrogate: an escaped backslash, then the surrogate.
        assert_eq!(
            source_text(&[0x5C, 0x5C, 0xD800], false).unwrap(),
            "\\\\\\uD800"
        );
    }

    #[test]
    fn group_names() {
        assert_eq!(group_name("abc"), "abc");
        assert_eq!(group_name("\\u0061b"), "ab");
        assert_eq!(group_name("\\u{1d4d1}x"), "\u{1d4d1}x");
        assert_eq!(group_name("\\uD835\\uDCD1"), "\u{1d4d1}");
    }

    #[test]
    fn names_are_normalized() {
        assert_eq!(
            normalize_names("(?<\\u0061>.)\\k<\\u{61}>", false),
            "(?<a>.)\\k<a>"
        );
        assert_eq!(
            normalize_names("(?<\\uD835\\uDCD1>.)", true),
            "(?<\u{1d4d1}>.)"
        );
        // Not name characters: left as they are.
        assert_eq!(normalize_names("(?<a\\u003E>.)", false), "(?<a\\u003E>.)");
        // Not names.
        assert_eq!(
            normalize_names("(?<=\\u0061)[(?<\\u0061>]\\(?<\\u0061>", false),
            "(?<=\\u0061)[(?<\\u0061>]\\(?<\\u0061>"
        );
    }

    #[test]
    fn huge_quantifiers_are_clamped() {
        let max = "9007199254740991";
        assert_eq!(
            clamp_quantifiers("a{99999999999999999999}", false),
            format!("a{{{max}}}")
        );
        assert_eq!(
            clamp_quantifiers("a{1,99999999999999999999}", false),
            format!("a{{1,{max}}}")
        );
        assert_eq!(
            clamp_quantifiers("a{99999999999999999999,}", false),
            format!("a{{{max},}}")
        );
        assert_eq!(clamp_quantifiers("a{2,1}", false), "a{2,1}");
        let reversed = "a{99999999999999999999,99999999999999999998}";
        assert_eq!(clamp_quantifiers(reversed, false), reversed);
        let literal = "\\{99999999999999999999}[{99999999999999999999}]";
        assert_eq!(clamp_quantifiers(literal, false), literal);
    }

    #[test]
    fn nesting() {
        assert_eq!(nesting_depth(&u("((a)[(])"), false), 2);
        assert_eq!(nesting_depth(&u("[[[a]]]"), true), 3);
        assert_eq!(nesting_depth(&u("[[[a]]]"), false), 1);
        assert_eq!(nesting_depth(&u("\\(\\[("), false), 1);
    }
}
