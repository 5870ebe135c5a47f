//! Unit tests of the public API: limits, errors, surrogates, start positions, sticky, names.

mod common;

use common::{Count, utf16};
use lore_jsregex::{Error, Flags, Regex};

fn exec(re: &Regex, input: &[u16], start: usize) -> Option<Vec<Option<(usize, usize)>>> {
    re.exec(input, start, &mut Count::default())
        .unwrap()
        .map(|c| c.slots)
}

fn re(pattern: &str, flags: &str) -> Regex {
    Regex::new(&utf16(pattern), flags).unwrap()
}

fn err(pattern: &[u16], flags: &str) -> Error {
    match Regex::new(pattern, flags) {
        Ok(r) => panic!("compiled: {r:?}"),
        Err(e) => e,
    }
}

#[test]
fn too_large() {
    let long = vec![u16::from(b'a'); 32_769];
    assert!(matches!(err(&long, ""), Error::TooLarge(m) if m.contains("32768")));
    assert!(Regex::new(&long[..32_768], "").is_ok());

    let deep = format!("{}a{}", "(".repeat(257), ")".repeat(257));
    assert!(matches!(err(&utf16(&deep), ""), Error::TooLarge(m) if m.contains("256")));
    let classes = format!("{}a{}", "[".repeat(300), "]".repeat(300));
    assert!(matches!(err(&utf16(&classes), "v"), Error::TooLarge(_)));
    // The deepest accepted nesting. Unoptimized builds of oxc's parser take about 20 KiB of
    // stack a level (optimized ones under 1 KiB), so this runs on a thread with room.
    let deepest = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(|| {
            for (open, close, flags) in [
                ("(", ")*", ""),
                ("(?:", ")", ""),
                ("(?<=", ")", ""),
                ("[", "]", "v"),
            ] {
                let p = format!("{}a{}", open.repeat(256), close.repeat(256));
                let r = Regex::new(&utf16(&p), flags).unwrap();
                assert!(exec(&r, &utf16("ba"), 0).is_some(), "{p}");
            }
        })
        .unwrap();
    deepest.join().unwrap();

    // Each `(?:(?:a|b){10}){9}` expands to about 1,000 instructions.
    let big = "(?:(?:a|b){10}){9}".repeat(300);
    assert!(matches!(err(&utf16(&big), ""), Error::TooLarge(m) if m.contains("100000")));
    // Too large to expand is a counted loop, not an error.
    let counted = re("(?:a|b){100000}c", "");
    assert_eq!(exec(&counted, &utf16("ab"), 0), None);
    let r = re("(?:a|b){3,100000}c", "");
    assert_eq!(exec(&r, &utf16("xababc"), 0), Some(vec![Some((1, 6))]));
}

#[test]
fn syntax_errors() {
    let e = err(&utf16("("), "");
    let Error::Syntax(m) = e else { panic!("{e:?}") };
    assert!(m.starts_with("Invalid regular expression: /(/: "), "{m}");
    for (p, f) in [
        ("a)", ""),
        ("[b-a]", ""),
        ("a**", ""),
        ("\\p{Foo}", "u"),
        ("\\p{Script=Foo}", "u"),
        ("(?<a>x)(?<a>y)", ""),
        ("\\k<nope>(?<a>x)", ""),
        ("\\1", "u"),
        ("{1}", "u"),
        ("(?ii:a)", ""),
        ("[a&&&b]", "v"),
        ("[(]", "v"),
        ("\\c", "u"),
        ("(?<=a)*", ""),
        ("[😀-😂]", ""),
    ] {
        assert!(
            matches!(err(&utf16(p), f), Error::Syntax(m) if m.starts_with("Invalid regular expression: /")),
            "/{p}/{f}"
        );
    }
    assert!(Regex::new(&utf16("[😀-😂]"), "u").is_ok());
    for f in ["gg", "x", "uv", "iI"] {
        assert!(
            matches!(err(&utf16("a"), f), Error::Syntax(m) if m.contains(f)),
            "{f}"
        );
    }
}

#[test]
fn unsupported_class_strings() {
    for p in [
        "[\\q{abc}]",
        "[\\q{}]",
        "\\p{RGI_Emoji}",
        "[\\p{Basic_Emoji}]",
    ] {
        assert!(
            matches!(err(&utf16(p), "v"), Error::Unsupported(m) if m.contains("not supported")),
            "{p}"
        );
    }
    // One-character class strings are plain characters.
    let r = re("[\\q{a|b}c]+", "v");
    assert_eq!(exec(&r, &utf16("xabcx"), 0), Some(vec![Some((1, 4))]));
}

#[test]
fn flags_and_groups() {
    let r = re("(?<a>x)(y)(?<b>z)|(?<a>w)", "dgimsvy");
    assert_eq!(
        r.flags(),
        Flags {
            global: true,
            ignore_case: true,
            multiline: true,
            dot_all: true,
            unicode: false,
            unicode_sets: true,
            sticky: true,
            has_indices: true,
        }
    );
    assert_eq!(r.group_count(), 4);
    assert_eq!(
        r.group_names(),
        &[
            ("a".to_string(), 1),
            ("b".to_string(), 3),
            ("a".to_string(), 4)
        ]
    );
    let r = re("(?<\\u{1d4d1}>.)(?<é>.)\\k<\\uD835\\uDCD1>", "u");
    assert_eq!(
        r.group_names(),
        &[("\u{1d4d1}".to_string(), 1), ("é".to_string(), 2)]
    );
    assert_eq!(
        exec(&r, &utf16("aba"), 0),
        Some(vec![Some((0, 3)), Some((0, 1)), Some((1, 2))])
    );
    let r = re("(?<\\u0061>.)\\k<a>", "");
    assert_eq!(r.group_names(), &[("a".to_string(), 1)]);
    assert_eq!(
        exec(&r, &utf16("xyy"), 0),
        Some(vec![Some((1, 3)), Some((1, 2))])
    );
    let clone = r.clone();
    assert_eq!(
        exec(&clone, &utf16("xyy"), 0),
        Some(vec![Some((1, 3)), Some((1, 2))])
    );
}

#[test]
fn lone_surrogates_in_pattern() {
    let pair = utf16("😀");
    // Without u, a lone surrogate in the pattern is one code unit and matches half a pair.
    let r = Regex::new(&[0xD83D], "").unwrap();
    assert_eq!(exec(&r, &pair, 0), Some(vec![Some((0, 1))]));
    let r = Regex::new(&[0xDE00], "").unwrap();
    assert_eq!(exec(&r, &pair, 0), Some(vec![Some((1, 2))]));
    // With u it is a code point of its own: it never matches half of a pair.
    let r = Regex::new(&[0xD83D], "u").unwrap();
    assert_eq!(exec(&r, &pair, 0), None);
    assert_eq!(exec(&r, &[0x61, 0xD83D, 0x62], 0), Some(vec![Some((1, 2))]));
    let r = Regex::new(&[0xDE00], "u").unwrap();
    assert_eq!(exec(&r, &pair, 0), None);
    // A lone lead written next to a trail escape does not pair up with it.
    let mut p = vec![0xD83D];
    p.extend(utf16("\\uDE00"));
    let r = Regex::new(&p, "u").unwrap();
    assert_eq!(exec(&r, &pair, 0), None);
    assert_eq!(
        exec(&Regex::new(&p, "").unwrap(), &pair, 0),
        Some(vec![Some((0, 2))])
    );
    // `\` + lone surrogate: an identity escape without u, a SyntaxError with u.
    let r = Regex::new(&[0x5C, 0xD83D], "").unwrap();
    assert_eq!(exec(&r, &pair, 0), Some(vec![Some((0, 1))]));
    assert!(matches!(
        Regex::new(&[0x5C, 0xD83D], "u"),
        Err(Error::Syntax(_))
    ));
    // Lone surrogates in classes and ranges.
    let mut p = utf16("[");
    p.extend([0xD800, 0x2D, 0xDBFF]);
    p.extend(utf16("]+"));
    let r = Regex::new(&p, "").unwrap();
    assert_eq!(exec(&r, &pair, 0), Some(vec![Some((0, 1))]));
    let r = Regex::new(&p, "u").unwrap();
    assert_eq!(exec(&r, &pair, 0), None);
    assert_eq!(
        exec(&r, &[0xD800, 0xDB00, 0x61], 0),
        Some(vec![Some((0, 2))])
    );
}

#[test]
fn lone_surrogates_in_input() {
    let input = [0x61, 0xD83D, 0x62, 0xDE00, 0xD83D, 0xDE00];
    let r = re("^.+$", "");
    assert_eq!(exec(&r, &input, 0), Some(vec![Some((0, 6))]));
    let r = re("^.{5}$", "u");
    assert_eq!(exec(&r, &input, 0), Some(vec![Some((0, 6))]));
    let r = re("\\uD83D", "u");
    assert_eq!(exec(&r, &input, 0), Some(vec![Some((1, 2))]));
    assert_eq!(exec(&r, &input, 2), None);
    let r = re("(.)\\1", "u");
    assert_eq!(exec(&r, &[0xD83D, 0xD83D, 0xDE00], 0), None);
    let r = re("(.)\\1", "");
    assert_eq!(
        exec(&r, &[0xD83D, 0xD83D, 0xDE00], 0),
        Some(vec![Some((0, 2)), Some((0, 1))])
    );
    let r = re("(?<=\\uDE00)x", "u");
    assert_eq!(exec(&r, &utf16("😀x"), 0), None);
    assert_eq!(exec(&r, &[0xDE00, 0x78], 0), Some(vec![Some((1, 2))]));
}

#[test]
fn astral_class_with_and_without_u() {
    // Without u, [😀] is a class of two code units and matches either half.
    let r = re("[😀]", "");
    assert_eq!(exec(&r, &utf16("😀"), 0), Some(vec![Some((0, 1))]));
    assert_eq!(exec(&r, &utf16("😀"), 1), Some(vec![Some((1, 2))]));
    assert_eq!(exec(&r, &[0x61, 0xDE00], 0), Some(vec![Some((1, 2))]));
    let r = re("^[😀]$", "");
    assert_eq!(exec(&r, &utf16("😀"), 0), None);
    // With u it is one code point.
    let r = re("[😀]", "u");
    assert_eq!(exec(&r, &utf16("😀"), 0), Some(vec![Some((0, 2))]));
    assert_eq!(exec(&r, &[0x61, 0xDE00], 0), None);
    let r = re("^.$", "");
    assert_eq!(exec(&r, &utf16("😀"), 0), None);
    assert_eq!(
        exec(&re("^..$", ""), &utf16("😀"), 0),
        Some(vec![Some((0, 2))])
    );
    assert_eq!(
        exec(&re("^.$", "u"), &utf16("😀"), 0),
        Some(vec![Some((0, 2))])
    );
}

#[test]
fn unicode_start_inside_a_pair() {
    let input = utf16("a😀b");
    // Element 2 is the trail of the pair at 1..3: matching starts at the pair.
    assert_eq!(exec(&re(".", "u"), &input, 2), Some(vec![Some((1, 3))]));
    assert_eq!(exec(&re("", "u"), &input, 2), Some(vec![Some((1, 1))]));
    assert_eq!(exec(&re("b", "u"), &input, 2), Some(vec![Some((3, 4))]));
    assert_eq!(exec(&re("😀", "uy"), &input, 2), Some(vec![Some((1, 3))]));
    assert_eq!(exec(&re("b", "uy"), &input, 2), None);
    // Without u, element 2 is a character of its own.
    assert_eq!(exec(&re(".", ""), &input, 2), Some(vec![Some((2, 3))]));
    // The search advances by code points.
    assert_eq!(exec(&re("\\uDE00", "u"), &input, 0), None);
    assert_eq!(
        exec(&re("\\uDE00", ""), &input, 0),
        Some(vec![Some((2, 3))])
    );
}

#[test]
fn start_positions_and_sticky() {
    let input = utf16("aXbXc");
    let r = re("X", "");
    assert_eq!(exec(&r, &input, 0), Some(vec![Some((1, 2))]));
    assert_eq!(exec(&r, &input, 2), Some(vec![Some((3, 4))]));
    assert_eq!(exec(&r, &input, 4), None);
    assert_eq!(exec(&r, &input, 5), None);
    assert_eq!(exec(&re("", ""), &input, 5), Some(vec![Some((5, 5))]));
    assert_eq!(exec(&re("", ""), &input, 6), None);
    let y = re("X", "y");
    assert_eq!(exec(&y, &input, 0), None);
    assert_eq!(exec(&y, &input, 1), Some(vec![Some((1, 2))]));
    assert_eq!(exec(&y, &input, 2), None);
    let gy = re("^X", "my");
    assert_eq!(exec(&gy, &utf16("a\nX"), 2), Some(vec![Some((2, 3))]));
    assert_eq!(
        exec(&re("(?<=a)X", "y"), &input, 1),
        Some(vec![Some((1, 2))])
    );
    assert_eq!(exec(&re("^", "y"), &input, 1), None);
}

#[test]
fn budget_is_charged_and_called() {
    let r = re("a+b", "");
    let mut c = Count::default();
    assert!(
        r.exec(&utf16(&"a".repeat(5000)), 0, &mut c)
            .unwrap()
            .is_none()
    );
    assert!(c.steps > 5000 && c.calls > 1);
    let mut c = Count::default();
    assert!(r.exec(&utf16("ab"), 0, &mut c).unwrap().is_some());
    assert!(c.steps > 0 && c.calls == 1);
    let mut c = Count::default();
    assert!(r.exec(&utf16("ab"), 3, &mut c).unwrap().is_none());
    assert_eq!(c.calls, 1);
}

#[test]
fn huge_quantifiers() {
    let input = utf16("aaa");
    assert_eq!(exec(&re("a{99999999999999999999}", ""), &input, 0), None);
    assert_eq!(
        exec(&re("a{0,99999999999999999999}", ""), &input, 0),
        Some(vec![Some((0, 3))])
    );
    assert_eq!(
        exec(&re("(?:){4294967296}b|a", ""), &input, 0),
        Some(vec![Some((0, 1))])
    );
    assert_eq!(
        exec(&re("(?:(?=a)){1000000000}a", ""), &input, 0),
        Some(vec![Some((0, 1))])
    );
    assert_eq!(
        exec(&re("(?:a|b){3,4294967296}", ""), &input, 0),
        Some(vec![Some((0, 3))])
    );
    assert_eq!(
        exec(&re("(a){2}", ""), &input, 0),
        Some(vec![Some((0, 2)), Some((1, 2))])
    );
}
