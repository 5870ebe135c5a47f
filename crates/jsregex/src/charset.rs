//! Character sets (sorted code point ranges), the spec's Canonicalize for case-insensitive
//! matching, and the sets behind `\d \s \w .` and `\p{..}`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, HirKind};

use crate::flags::Error;

/// The largest code point.
pub(crate) const MAX_CP: u32 = 0x10_FFFF;

/// A set of code points (or, in non-Unicode mode, code units) as sorted, disjoint,
/// non-adjacent inclusive ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CharSet {
    ranges: Vec<(u32, u32)>,
}

impl CharSet {
    /// The empty set.
    pub(crate) fn empty() -> CharSet {
        CharSet { ranges: Vec::new() }
    }

    /// Every code point.
    pub(crate) fn all() -> CharSet {
        CharSet {
            ranges: vec![(0, MAX_CP)],
        }
    }

    /// The set holding just `c`.
    pub(crate) fn single(c: u32) -> CharSet {
        CharSet {
            ranges: vec![(c, c)],
        }
    }

    /// A set from arbitrary (possibly overlapping, unsorted) inclusive ranges.
    pub(crate) fn from_ranges(mut ranges: Vec<(u32, u32)>) -> CharSet {
        ranges.retain(|&(a, b)| a <= b);
        ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        CharSet { ranges: out }
    }

    /// The ranges, sorted and disjoint.
    pub(crate) fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Whether `c` is in the set.
    pub(crate) fn contains(&self, c: u32) -> bool {
        self.ranges
            .binary_search_by(|&(a, b)| {
                if b < c {
                    std::cmp::Ordering::Less
                } else if a > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    /// The one member, if the set has exactly one.
    pub(crate) fn as_single(&self) -> Option<u32> {
        match self.ranges.as_slice() {
            [(a, b)] if a == b => Some(*a),
            _ => None,
        }
    }

    /// Adds every member of `other`.
    pub(crate) fn union(&self, other: &CharSet) -> CharSet {
        // A linear merge of the two sorted range lists.
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            let next = if j >= b.len() || (i < a.len() && a[i].0 <= b[j].0) {
                i += 1;
                a[i - 1]
            } else {
                j += 1;
                b[j - 1]
            };
            match out.last_mut() {
                Some(last) if next.0 <= last.1.saturating_add(1) => last.1 = last.1.max(next.1),
                _ => out.push(next),
            }
        }
        CharSet { ranges: out }
    }

    /// The complement over all code points `0..=0x10FFFF`.
    pub(crate) fn complement(&self) -> CharSet {
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut next = 0u32;
        for &(a, b) in &self.ranges {
            if a > next {
                out.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= MAX_CP {
            out.push((next, MAX_CP));
        }
        CharSet { ranges: out }
    }

    /// The members in both sets.
    pub(crate) fn intersect(&self, other: &CharSet) -> CharSet {
        let (a, b) = (&self.ranges, &other.ranges);
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        CharSet { ranges: out }
    }

    /// The members of `self` not in `other`.
    pub(crate) fn subtract(&self, other: &CharSet) -> CharSet {
        self.intersect(&other.complement())
    }
}

// ---------------------------------------------------------------------------------------
// Escapes and dot
// ---------------------------------------------------------------------------------------

/// `\d`.
pub(crate) fn digits() -> CharSet {
    CharSet::from_ranges(vec![(0x30, 0x39)])
}

/// `\s`: WhiteSpace and LineTerminator code points.
pub(crate) fn spaces() -> CharSet {
    CharSet::from_ranges(vec![
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

/// The spec's WordCharacters(rer): ASCII word characters, plus U+017F and U+212A when
/// case-insensitive matching uses simple case folding (they fold into `s` and `k`).
pub(crate) fn word_chars(unicode_icase: bool) -> CharSet {
    let mut r = vec![(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
    if unicode_icase {
        r.push((0x17F, 0x17F));
        r.push((0x212A, 0x212A));
    }
    CharSet::from_ranges(r)
}

/// Whether the code unit is one of the (ASCII-or-folded) word characters.
pub(crate) fn is_word_unit(u: u16, unicode_icase: bool) -> bool {
    matches!(u, 0x30..=0x39 | 0x41..=0x5A | 0x5F | 0x61..=0x7A)
        || (unicode_icase && (u == 0x17F || u == 0x212A))
}

/// Whether the code unit is a LineTerminator.
pub(crate) fn is_line_terminator(u: u16) -> bool {
    matches!(u, 0x0A | 0x0D | 0x2028 | 0x2029)
}

/// `.` without the `s` flag: everything but line terminators.
pub(crate) fn dot() -> CharSet {
    CharSet::from_ranges(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]).complement()
}

// ---------------------------------------------------------------------------------------
// Case folding
// ---------------------------------------------------------------------------------------

/// Non-Unicode Canonicalize data: the canonical code unit of every code unit, and the
/// members of every equivalence class with more than one member, sorted by canonical unit.
struct NonUnicodeFold {
    canon: Vec<u16>,
    members: Vec<(u16, u16)>,
}

fn non_unicode_fold() -> &'static NonUnicodeFold {
    static TABLE: OnceLock<NonUnicodeFold> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut canon = vec![0u16; 0x1_0000];
        for (u, slot) in canon.iter_mut().enumerate() {
            // The spec: toUppercase of the code unit, kept only if it is a single code unit
            // and does not map a non-ASCII unit into ASCII.
            let unit = u as u16;
            *slot = unit;
            if let Some(c) = char::from_u32(u as u32) {
                let mut up = c.to_uppercase();
                if let (Some(single), None) = (up.next(), up.next()) {
                    let s = single as u32;
                    if s <= 0xFFFF && !(u >= 128 && s < 128) {
                        *slot = s as u16;
                    }
                }
            }
        }
        let mut count = vec![0u16; 0x1_0000];
        for &k in &canon {
            count[k as usize] += 1;
        }
        let mut members: Vec<(u16, u16)> = (0..=0xFFFFu16)
            .filter(|&u| count[canon[u as usize] as usize] > 1)
            .map(|u| (canon[u as usize], u))
            .collect();
        members.sort_unstable();
        NonUnicodeFold { canon, members }
    })
}

/// Canonicalize(rer, ch) for non-Unicode mode: the code unit's single-unit uppercase.
pub(crate) fn canon_unit(u: u16) -> u16 {
    non_unicode_fold().canon[u as usize]
}

/// Unicode Canonicalize data: for every code point whose simple-case-folding class has more
/// than one member, a representative (the least member) of its class.
struct UnicodeFold {
    by_cp: Vec<(u32, u32)>,
    by_rep: Vec<(u32, u32)>,
}

fn unicode_fold() -> &'static UnicodeFold {
    static TABLE: OnceLock<UnicodeFold> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Every non-trivial simple-case-folding class holds a character that changes when
        // case folded or case mapped, so these candidates reach every class.
        let candidates =
            regex_syntax_class(r"[\p{Changes_When_Casefolded}\p{Changes_When_Casemapped}]")
                .expect("regex-syntax knows the case properties");
        let mut by_cp: Vec<(u32, u32)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for &(a, b) in candidates.ranges() {
            for cp in a..=b {
                if seen.contains(&cp) {
                    continue;
                }
                let Some(c) = char::from_u32(cp) else {
                    continue;
                };
                let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
                class.case_fold_simple();
                let members: Vec<u32> = class
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start() as u32..=r.end() as u32)
                    .collect();
                if members.len() > 1 {
                    let rep = members[0];
                    for m in members {
                        if seen.insert(m) {
                            by_cp.push((m, rep));
                        }
                    }
                }
            }
        }
        by_cp.sort_unstable();
        let mut by_rep: Vec<(u32, u32)> = by_cp.iter().map(|&(c, r)| (r, c)).collect();
        by_rep.sort_unstable();
        UnicodeFold { by_cp, by_rep }
    })
}

/// Canonicalize(rer, ch) for Unicode mode, up to the choice of representative: two code
/// points are equal under simple case folding iff their `canon_cp` are equal.
pub(crate) fn canon_cp(cp: u32) -> u32 {
    let t = &unicode_fold().by_cp;
    match t.binary_search_by_key(&cp, |&(c, _)| c) {
        Ok(i) => t[i].1,
        Err(_) => cp,
    }
}

/// The set of every character whose canonical form is the canonical form of some member of
/// `set`: what a case-insensitive CharacterSetMatcher accepts.
pub(crate) fn case_close(set: &CharSet, unicode: bool) -> CharSet {
    let mut extra: Vec<(u32, u32)> = Vec::new();
    let size: u64 = set.ranges.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
    if size <= 64 {
        // Few members: look each one's class up.
        for &(a, b) in &set.ranges {
            for c in a..=b {
                if unicode {
                    let f = unicode_fold();
                    let r = canon_cp(c);
                    let lo = f.by_rep.partition_point(|&(x, _)| x < r);
                    for &(_, m) in f.by_rep[lo..].iter().take_while(|&&(x, _)| x == r) {
                        extra.push((m, m));
                    }
                } else if c <= 0xFFFF {
                    let f = non_unicode_fold();
                    let k = canon_unit(c as u16);
                    let lo = f.members.partition_point(|&(x, _)| x < k);
                    for &(_, m) in f.members[lo..].iter().take_while(|&&(x, _)| x == k) {
                        extra.push((u32::from(m), u32::from(m)));
                    }
                }
            }
        }
    } else if unicode {
        let f = unicode_fold();
        let mut reps: Vec<u32> = f
            .by_cp
            .iter()
            .filter(|&&(c, _)| set.contains(c))
            .map(|&(_, r)| r)
            .collect();
        reps.sort_unstable();
        reps.dedup();
        for r in reps {
            let lo = f.by_rep.partition_point(|&(x, _)| x < r);
            for &(x, c) in &f.by_rep[lo..] {
                if x != r {
                    break;
                }
                extra.push((c, c));
            }
        }
    } else {
        let f = non_unicode_fold();
        let mut keys: Vec<u16> = f
            .members
            .iter()
            .filter(|&&(_, m)| set.contains(u32::from(m)))
            .map(|&(k, _)| k)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            let lo = f.members.partition_point(|&(x, _)| x < k);
            for &(x, m) in &f.members[lo..] {
                if x != k {
                    break;
                }
                extra.push((u32::from(m), u32::from(m)));
            }
        }
    }
    if extra.is_empty() {
        return set.clone();
    }
    set.union(&CharSet::from_ranges(extra))
}

// ---------------------------------------------------------------------------------------
// Unicode properties
// ---------------------------------------------------------------------------------------

/// Parses a one-class regex-syntax pattern into a set.
fn regex_syntax_class(pattern: &str) -> Option<CharSet> {
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => Some(class_to_set(cls)),
        HirKind::Empty => Some(CharSet::empty()),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).ok()?;
            let mut cs = s.chars();
            let c = cs.next()?;
            cs.next().is_none().then(|| CharSet::single(c as u32))
        }
        _ => None,
    }
}

fn class_to_set(cls: &ClassUnicode) -> CharSet {
    CharSet::from_ranges(
        cls.ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
    )
}

const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);

/// The code points of `\p{name=value}` or `\p{name}` (names already validated by the
/// parser). Surrogate code points, which regex-syntax's tables cannot hold, are added where
/// Unicode puts them (General_Category Cs, Script Unknown, Assigned, Any).
pub(crate) fn property(name: &str, value: Option<&str>) -> Result<CharSet, Error> {
    // Building a set from regex-syntax's tables is slow next to matching; remember them
    // (there are only a few hundred property names and values).
    type Cache = Mutex<HashMap<(String, Option<String>), CharSet>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (name.to_string(), value.map(str::to_string));
    let cache = CACHE.get_or_init(Cache::default);
    if let Some(set) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(set);
    }
    let set = property_uncached(name, value)?;
    if let Ok(mut c) = cache.lock() {
        c.insert(key, set.clone());
    }
    Ok(set)
}

fn property_uncached(name: &str, value: Option<&str>) -> Result<CharSet, Error> {
    let unknown = |what: &str| {
        Error::Unsupported(format!(
            "Invalid regular expression: the Unicode property {what} is not in this engine's Unicode tables"
        ))
    };
    let with_surrogates = |s: CharSet| s.union(&CharSet::from_ranges(vec![SURROGATES]));
    match (name, value) {
        ("General_Category" | "gc", Some(v)) => {
            if matches!(v, "Cs" | "Surrogate") {
                return Ok(CharSet::from_ranges(vec![SURROGATES]));
            }
            let set = regex_syntax_class(&format!(r"\p{{gc={v}}}")).ok_or_else(|| unknown(v))?;
            Ok(if matches!(v, "C" | "Other") {
                with_surrogates(set)
            } else {
                set
            })
        }
        ("Script" | "sc" | "Script_Extensions" | "scx", Some(v)) => {
            let key = if matches!(name, "Script" | "sc") {
                "sc"
            } else {
                "scx"
            };
            let set = regex_syntax_class(&format!(r"\p{{{key}={v}}}")).ok_or_else(|| unknown(v))?;
            Ok(if matches!(v, "Unknown" | "Zzzz") {
                with_surrogates(set)
            } else {
                set
            })
        }
        ("Any", None) => Ok(CharSet::all()),
        ("ASCII", None) => Ok(CharSet::from_ranges(vec![(0, 0x7F)])),
        ("Assigned", None) => {
            let unassigned = regex_syntax_class(r"\p{gc=Cn}").ok_or_else(|| unknown(name))?;
            Ok(unassigned.complement())
        }
        (n, None) => regex_syntax_class(&format!(r"\p{{{n}}}")).ok_or_else(|| unknown(n)),
        (n, Some(v)) => Err(unknown(&format!("{n}={v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_ops() {
        let a = CharSet::from_ranges(vec![(5, 10), (1, 3), (4, 4)]);
        assert_eq!(a.ranges(), &[(1, 10)]);
        let b = CharSet::from_ranges(vec![(8, 20)]);
        assert_eq!(a.intersect(&b).ranges(), &[(8, 10)]);
        assert_eq!(a.subtract(&b).ranges(), &[(1, 7)]);
        assert_eq!(CharSet::all().complement().ranges(), &[]);
        assert_eq!(CharSet::empty().complement().ranges(), &[(0, MAX_CP)]);
        assert!(a.contains(1) && a.contains(10) && !a.contains(11) && !a.contains(0));
    }

    #[test]
    fn folding() {
        assert_eq!(canon_unit(u16::from(b'a')), u16::from(b'A'));
        assert_eq!(canon_unit(0x17F), 0x17F); // ſ would map into ASCII
        assert_eq!(canon_unit(0xDF), 0xDF); // ß uppercases to two units
        assert_eq!(canon_cp(0x17F), canon_cp(u32::from(b's')));
        assert_eq!(canon_cp(0x212A), canon_cp(u32::from(b'k')));
        let k = case_close(&CharSet::single(u32::from(b'k')), true);
        assert_eq!(k.ranges(), &[(0x4B, 0x4B), (0x6B, 0x6B), (0x212A, 0x212A)]);
        let k = case_close(&CharSet::single(u32::from(b'k')), false);
        assert_eq!(k.ranges(), &[(0x4B, 0x4B), (0x6B, 0x6B)]);
    }

    #[test]
    fn properties() {
        assert!(
            property("General_Category", Some("Lu"))
                .unwrap()
                .contains(0x41)
        );
        assert!(property("sc", Some("Greek")).unwrap().contains(0x3B1));
        assert!(property("Assigned", None).unwrap().contains(0xD800));
        assert!(property("White_Space", None).unwrap().contains(0x20));
        assert!(property("gc", Some("Cs")).unwrap().contains(0xDC00));
    }
}
