//! Pattern parsing: size and nesting checks, oxc's parser, and lowering of oxc's AST to an owned tree whose every node has its spec meaning resolved
//! (case folding, modifiers, Annex B characters, class set operations).

use std::cell::RefCell;
use std::collections::HashMap;

use oxc_allocator::Allocator;
use oxc_regular_expression::{LiteralParser, Options, ast};

use crate::charset::{self, CharSet};
use crate::flags::{Error, Flags, MAX_NESTING, MAX_PATTERN_UNITS};
use crate::source::{
    clamp_quantifiers, display_source, fix_class_controls, group_name, nesting_depth,
    normalize_names, source_text,
};

/// A zero-width assertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Assertion {
    /// `^`.
    Start { multiline: bool },
    /// `$`.
    End { multiline: bool },
    /// `\b` (`negated`: `\B`); `unicode_icase`: U+017F and U+212A are word characters.
    Boundary { negated: bool, unicode_icase: bool },
}

/// The lowered pattern.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// Matches the empty string.
    Empty,
    /// One character equal to this code point (code unit in non-Unicode mode).
    Char(u32),
    /// One character in the set (case folding already applied).
    Set(CharSet),
    /// The items in order (reversed when matching backward).
    Seq(Vec<Node>),
    /// Alternatives in priority order.
    Alt(Vec<Node>),
    /// Capturing group with its 1-based index.
    Group(usize, Box<Node>),
    /// Quantified body; `max: None` is unbounded.
    Repeat {
        body: Box<Node>,
        min: u64,
        max: Option<u64>,
        greedy: bool,
    },
    /// A zero-width assertion.
    Assert(Assertion),
    /// Lookahead (`behind: false`) or lookbehind, positive or negative.
    Look {
        body: Box<Node>,
        behind: bool,
        negative: bool,
    },
    /// Backreference to the first participating group among `groups` (several for a
    /// duplicated name).
    BackRef { groups: Vec<usize>, icase: bool },
}

/// The parsed pattern with its group information.
pub(crate) struct Tree {
    pub(crate) root: Node,
    pub(crate) groups: usize,
    pub(crate) names: Vec<(String, usize)>,
    pub(crate) has_backrefs: bool,
}

/// Parses and lowers `pattern` under `flags` (`flags_text` is only for messages).
pub(crate) fn parse(pattern: &[u16], flags_text: &str, flags: Flags) -> Result<Tree, Error> {
    let shown = display_source(pattern);
    let syntax = |msg: &str| {
        Error::Syntax(format!(
            "Invalid regular expression: /{shown}/{flags_text}: {msg}"
        ))
    };
    if pattern.len() > MAX_PATTERN_UNITS {
        return Err(Error::TooLarge(format!(
            "Invalid regular expression: the pattern is {} code units long; the limit is {MAX_PATTERN_UNITS}",
            pattern.len()
        )));
    }
    if nesting_depth(pattern, flags.unicode_sets) > MAX_NESTING {
        return Err(Error::TooLarge(format!(
            "Invalid regular expression: /{shown}/{flags_text}: groups and classes nest deeper than {MAX_NESTING} levels"
        )));
    }
    let unicode = flags.either_unicode();
    let fixed;
    let pattern = if unicode {
        pattern
    } else {
        fixed = fix_class_controls(pattern);
        &fixed
    };
    let text = source_text(pattern, unicode).map_err(|m| syntax(&m))?;
    let text = clamp_quantifiers(&text, flags.unicode_sets);
    let text = normalize_names(&text, flags.unicode_sets);
    let oxc_flags = if flags.unicode_sets {
        "v"
    } else if flags.unicode {
        "u"
    } else {
        ""
    };
    let alloc = Allocator::default();
    let ast = LiteralParser::new(&alloc, &text, Some(oxc_flags), Options::default())
        .parse()
        .map_err(|e| {
            let msg = e.to_string();
            let msg = msg
                .strip_prefix("Invalid regular expression:")
                .unwrap_or(&msg)
                .trim();
            syntax(msg)
        })?;

    let mut names = Vec::new();
    let mut count = 0usize;
    collect_groups_disj(&ast.body, &mut count, &mut names);
    let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
    for (n, i) in &names {
        by_name.entry(n.clone()).or_default().push(*i);
    }
    let mut lower = Lower {
        unicode,
        vmode: flags.unicode_sets,
        property_cache: RefCell::default(),
        escape_cache: RefCell::default(),
        by_name,
        next_group: 0,
        has_backrefs: false,
    };
    let mode = Mode {
        icase: flags.ignore_case,
        multiline: flags.multiline,
        dot_all: flags.dot_all,
    };
    let root = lower.disjunction(&ast.body, mode)?;
    Ok(Tree {
        root,
        groups: count,
        names,
        has_backrefs: lower.has_backrefs,
    })
}

fn collect_groups_disj(
    d: &ast::Disjunction<'_>,
    count: &mut usize,
    names: &mut Vec<(String, usize)>,
) {
    for alt in &d.body {
        for term in &alt.body {
            collect_groups_term(term, count, names);
        }
    }
}

fn collect_groups_term(t: &ast::Term<'_>, count: &mut usize, names: &mut Vec<(String, usize)>) {
    match t {
        ast::Term::CapturingGroup(g) => {
            *count += 1;
            if let Some(n) = &g.name {
                names.push((group_name(n.as_str()), *count));
            }
            collect_groups_disj(&g.body, count, names);
        }
        ast::Term::IgnoreGroup(g) => collect_groups_disj(&g.body, count, names),
        ast::Term::LookAroundAssertion(g) => collect_groups_disj(&g.body, count, names),
        ast::Term::Quantifier(q) => collect_groups_term(&q.body, count, names),
        _ => {}
    }
}

type PropertyKey = (String, Option<String>, bool, bool);

/// The flags that modifiers can scope.
#[derive(Clone, Copy)]
struct Mode {
    icase: bool,
    multiline: bool,
    dot_all: bool,
}

struct Lower {
    unicode: bool,
    vmode: bool,
    /// Property sets already built for this pattern, by (name, value, negated, icase).
    property_cache: RefCell<HashMap<PropertyKey, CharSet>>,
    /// Escape sets already built for this pattern, by (escape, icase).
    escape_cache: RefCell<HashMap<(u8, bool), CharSet>>,
    by_name: HashMap<String, Vec<usize>>,
    next_group: usize,
    has_backrefs: bool,
}

/// Builds a sequence, flattening nested sequences and dropping empties.
pub(crate) fn seq(items: Vec<Node>) -> Node {
    let mut out = Vec::with_capacity(items.len());
    for n in items {
        match n {
            Node::Empty => {}
            Node::Seq(inner) => out.extend(inner),
            other => out.push(other),
        }
    }
    match out.len() {
        0 => Node::Empty,
        1 => out.pop().unwrap_or(Node::Empty),
        _ => Node::Seq(out),
    }
}

impl Lower {
    fn unsupported(what: &str) -> Error {
        Error::Unsupported(format!(
            "Invalid regular expression: {what} is not supported by this engine"
        ))
    }

    fn disjunction(&mut self, d: &ast::Disjunction<'_>, mode: Mode) -> Result<Node, Error> {
        let mut alts = Vec::with_capacity(d.body.len());
        for alt in &d.body {
            let mut items = Vec::with_capacity(alt.body.len());
            for term in &alt.body {
                items.push(self.term(term, mode)?);
            }
            alts.push(seq(items));
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(alts)
        })
    }

    /// A single-character matcher for `set`, case-closed under `icase`.
    fn char_node(&self, set: CharSet, icase: bool) -> Node {
        let set = if icase {
            charset::case_close(&set, self.unicode)
        } else {
            set
        };
        match set.as_single() {
            Some(c) => Node::Char(c),
            None => Node::Set(set),
        }
    }

    fn term(&mut self, t: &ast::Term<'_>, mode: Mode) -> Result<Node, Error> {
        Ok(match t {
            ast::Term::BoundaryAssertion(b) => Node::Assert(match b.kind {
                ast::BoundaryAssertionKind::Start => Assertion::Start {
                    multiline: mode.multiline,
                },
                ast::BoundaryAssertionKind::End => Assertion::End {
                    multiline: mode.multiline,
                },
                ast::BoundaryAssertionKind::Boundary => Assertion::Boundary {
                    negated: false,
                    unicode_icase: self.unicode && mode.icase,
                },
                ast::BoundaryAssertionKind::NegativeBoundary => Assertion::Boundary {
                    negated: true,
                    unicode_icase: self.unicode && mode.icase,
                },
            }),
            ast::Term::LookAroundAssertion(l) => {
                let (behind, negative) = match l.kind {
                    ast::LookAroundAssertionKind::Lookahead => (false, false),
                    ast::LookAroundAssertionKind::NegativeLookahead => (false, true),
                    ast::LookAroundAssertionKind::Lookbehind => (true, false),
                    ast::LookAroundAssertionKind::NegativeLookbehind => (true, true),
                };
                Node::Look {
                    body: Box::new(self.disjunction(&l.body, mode)?),
                    behind,
                    negative,
                }
            }
            ast::Term::Quantifier(q) => Node::Repeat {
                body: Box::new(self.term(&q.body, mode)?),
                min: q.min,
                max: q.max,
                greedy: q.greedy,
            },
            ast::Term::Character(c) => self.char_node(CharSet::single(c.value), mode.icase),
            ast::Term::Dot(_) => {
                if mode.dot_all {
                    Node::Set(CharSet::all())
                } else {
                    Node::Set(charset::dot())
                }
            }
            ast::Term::CharacterClassEscape(e) => {
                let set = self.escape_set(e.kind, mode.icase);
                self.char_node(set, false)
            }
            ast::Term::UnicodePropertyEscape(p) => {
                let set = self.property_set(p, mode.icase)?;
                self.char_node(set, false)
            }
            ast::Term::CharacterClass(c) => {
                let set = if self.vmode {
                    self.class_v(c, mode.icase)?
                } else {
                    let mut set = self.class_union(c, mode.icase)?;
                    if mode.icase {
                        set = charset::case_close(&set, self.unicode);
                    }
                    if c.negative { set.complement() } else { set }
                };
                self.char_node(set, false)
            }
            ast::Term::CapturingGroup(g) => {
                self.next_group += 1;
                let index = self.next_group;
                Node::Group(index, Box::new(self.disjunction(&g.body, mode)?))
            }
            ast::Term::IgnoreGroup(g) => {
                let mut m = mode;
                if let Some(mods) = &g.modifiers {
                    for (flag, on) in [(&mods.enabling, true), (&mods.disabling, false)] {
                        if flag.contains(ast::Modifier::I) {
                            m.icase = on;
                        }
                        if flag.contains(ast::Modifier::M) {
                            m.multiline = on;
                        }
                        if flag.contains(ast::Modifier::S) {
                            m.dot_all = on;
                        }
                    }
                }
                self.disjunction(&g.body, m)?
            }
            ast::Term::IndexedReference(r) => {
                self.has_backrefs = true;
                Node::BackRef {
                    groups: vec![r.index as usize],
                    icase: mode.icase,
                }
            }
            ast::Term::NamedReference(r) => {
                self.has_backrefs = true;
                let groups = self
                    .by_name
                    .get(&group_name(r.name.as_str()))
                    .cloned()
                    .unwrap_or_default();
                Node::BackRef {
                    groups,
                    icase: mode.icase,
                }
            }
        })
    }

    /// `\d \D \s \S \w \W`, case-closed under `icase` (closure and complement commute here:
    /// each of these sets is closed under case folding).
    fn escape_set(&self, kind: ast::CharacterClassEscapeKind, icase: bool) -> CharSet {
        use ast::CharacterClassEscapeKind as K;
        let key = (kind as u8, icase);
        if let Some(set) = self.escape_cache.borrow().get(&key) {
            return set.clone();
        }
        let base = match kind {
            K::D | K::NegativeD => charset::digits(),
            K::S | K::NegativeS => charset::spaces(),
            K::W | K::NegativeW => charset::word_chars(self.unicode && icase),
        };
        let base = if icase {
            charset::case_close(&base, self.unicode)
        } else {
            base
        };
        let set = match kind {
            K::NegativeD | K::NegativeS | K::NegativeW => base.complement(),
            _ => base,
        };
        self.escape_cache.borrow_mut().insert(key, set.clone());
        set
    }

    /// `\p{..}` / `\P{..}`, case-closed under `icase`.
    fn property_set(
        &self,
        p: &ast::UnicodePropertyEscape<'_>,
        icase: bool,
    ) -> Result<CharSet, Error> {
        if p.strings {
            return Err(Self::unsupported(&format!(
                "the property of strings \\p{{{}}}",
                p.name
            )));
        }
        let key = (
            p.name.as_str().to_string(),
            p.value.as_ref().map(|v| v.as_str().to_string()),
            p.negative,
            icase,
        );
        if let Some(set) = self.property_cache.borrow().get(&key) {
            return Ok(set.clone());
        }
        let set = charset::property(p.name.as_str(), p.value.as_ref().map(|v| v.as_str()))?;
        let close = |s: CharSet| {
            if icase {
                charset::case_close(&s, true)
            } else {
                s
            }
        };
        let set = match (p.negative, self.vmode) {
            (false, _) => close(set),
            // `v`: the complement of the folded set (MaybeSimpleCaseFolding, then
            // CharacterComplement); `u`: the plain complement, matched case-insensitively.
            (true, true) => close(set).complement(),
            (true, false) => close(set.complement()),
        };
        self.property_cache.borrow_mut().insert(key, set.clone());
        Ok(set)
    }

    /// A non-`v` class body: the union of its members, not yet negated. Escapes and
    /// properties come case-closed under `icase` (closing them first is the same as closing
    /// the union, and gives `\W` the spec's WordCharacters); the caller closes the rest.
    fn class_union(&self, c: &ast::CharacterClass<'_>, icase: bool) -> Result<CharSet, Error> {
        let mut ranges = Vec::new();
        let mut extra = CharSet::empty();
        for item in &c.body {
            match item {
                ast::CharacterClassContents::CharacterClassRange(r) => {
                    ranges.push((r.min.value, r.max.value))
                }
                ast::CharacterClassContents::Character(ch) => ranges.push((ch.value, ch.value)),
                ast::CharacterClassContents::CharacterClassEscape(e) => {
                    extra = extra.union(&self.escape_set(e.kind, icase));
                }
                ast::CharacterClassContents::UnicodePropertyEscape(p) => {
                    extra = extra.union(&self.property_set(p, icase)?);
                }
                ast::CharacterClassContents::NestedCharacterClass(n) => {
                    extra = extra.union(&self.class_v(n, icase)?);
                }
                ast::CharacterClassContents::ClassStringDisjunction(d) => {
                    extra = extra.union(&self.class_strings(d, icase)?);
                }
            }
        }
        Ok(CharSet::from_ranges(ranges).union(&extra))
    }

    /// `\q{a|b}` whose strings are single characters; longer or empty strings are unsupported.
    fn class_strings(
        &self,
        d: &ast::ClassStringDisjunction<'_>,
        icase: bool,
    ) -> Result<CharSet, Error> {
        let mut set = CharSet::empty();
        for s in &d.body {
            match s.body.as_slice() {
                [ch] => set = set.union(&self.leaf(CharSet::single(ch.value), icase)),
                _ => {
                    return Err(Self::unsupported(
                        "a class string \\q{..} of other than one character",
                    ));
                }
            }
        }
        Ok(set)
    }

    /// A `v`-mode class operand, case-closed under `icase` (the spec's MaybeSimpleCaseFolding:
    /// with every operand closed, the set operations stay closed).
    fn leaf(&self, set: CharSet, icase: bool) -> CharSet {
        if icase {
            charset::case_close(&set, true)
        } else {
            set
        }
    }

    /// A `v`-mode class: set operations over case-closed operands, then negation.
    fn class_v(&self, c: &ast::CharacterClass<'_>, icase: bool) -> Result<CharSet, Error> {
        let mut operands = Vec::with_capacity(c.body.len());
        for item in &c.body {
            operands.push(match item {
                ast::CharacterClassContents::CharacterClassRange(r) => self.leaf(
                    CharSet::from_ranges(vec![(r.min.value, r.max.value)]),
                    icase,
                ),
                ast::CharacterClassContents::Character(ch) => {
                    self.leaf(CharSet::single(ch.value), icase)
                }
                ast::CharacterClassContents::CharacterClassEscape(e) => {
                    self.escape_set(e.kind, icase)
                }
                ast::CharacterClassContents::UnicodePropertyEscape(p) => {
                    self.property_set(p, icase)?
                }
                ast::CharacterClassContents::NestedCharacterClass(n) => self.class_v(n, icase)?,
                ast::CharacterClassContents::ClassStringDisjunction(d) => {
                    self.class_strings(d, icase)?
                }
            });
        }
        let mut it = operands.into_iter();
        let first = it.next().unwrap_or_default();
        let set = match c.kind {
            ast::CharacterClassContentsKind::Union => it.fold(first, |a, b| a.union(&b)),
            ast::CharacterClassContentsKind::Intersection => it.fold(first, |a, b| a.intersect(&b)),
            ast::CharacterClassContentsKind::Subtraction => it.fold(first, |a, b| a.subtract(&b)),
        };
        Ok(if c.negative { set.complement() } else { set })
    }
}
