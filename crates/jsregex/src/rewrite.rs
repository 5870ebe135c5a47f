//! Analysis of the lowered tree (lengths, captures, size estimates) and the rewrites that
//! keep every result but save work: quantified bodies that can only match empty, and the
//! tails of lookaround bodies.

use crate::parse::{Node, seq};

/// Largest program a counted repetition may expand into.
pub(crate) const EXPAND_LIMIT: u64 = 2_000;

/// The least and greatest number of characters `n` can match (`None`: unbounded).
pub(crate) fn len_range(n: &Node) -> (u64, Option<u64>) {
    match n {
        Node::Empty | Node::Assert(_) | Node::Look { .. } => (0, Some(0)),
        Node::Char(_) | Node::Set(_) => (1, Some(1)),
        Node::BackRef { .. } => (0, None),
        Node::Group(_, b) => len_range(b),
        Node::Seq(items) => items.iter().fold((0, Some(0)), |(lo, hi), i| {
            let (a, b) = len_range(i);
            (
                lo.saturating_add(a),
                hi.zip(b).map(|(x, y)| x.saturating_add(y)),
            )
        }),
        Node::Alt(alts) => {
            let mut lo = u64::MAX;
            let mut hi = Some(0);
            for a in alts {
                let (x, y) = len_range(a);
                lo = lo.min(x);
                hi = hi.zip(y).map(|(p, q)| p.max(q));
            }
            (if alts.is_empty() { 0 } else { lo }, hi)
        }
        Node::Repeat { body, min, max, .. } => {
            let (a, b) = len_range(body);
            let hi = match (b, max) {
                (Some(0), _) => Some(0),
                (Some(b), Some(m)) => Some(b.saturating_mul(*m)),
                _ => None,
            };
            (a.saturating_mul(*min), hi)
        }
    }
}

/// The capture slots (`2 * first .. 2 * (last + 1)`) of the groups inside `n`, if any.
pub(crate) fn group_slots(n: &Node) -> Option<(u32, u32)> {
    fn walk(n: &Node, acc: &mut Option<(usize, usize)>) {
        match n {
            Node::Group(i, b) => {
                *acc = Some(acc.map_or((*i, *i), |(a, z)| (a.min(*i), z.max(*i))));
                walk(b, acc);
            }
            Node::Seq(v) | Node::Alt(v) => v.iter().for_each(|x| walk(x, acc)),
            Node::Repeat { body, .. } | Node::Look { body, .. } => walk(body, acc),
            _ => {}
        }
    }
    let mut acc = None;
    walk(n, &mut acc);
    acc.map(|(a, z)| (2 * a as u32, 2 * (z as u32 + 1)))
}

/// Whether `n` holds a backreference.
fn has_backref(n: &Node) -> bool {
    match n {
        Node::BackRef { .. } => true,
        Node::Group(_, b) | Node::Repeat { body: b, .. } | Node::Look { body: b, .. } => {
            has_backref(b)
        }
        Node::Seq(v) | Node::Alt(v) => v.iter().any(has_backref),
        _ => false,
    }
}

/// Result-preserving rewrites: a quantified body that can only match empty runs just its
/// minimum (iterations past it fail the empty check anyway), and lookaround bodies lose
/// what their tail cannot change (see [`tail`]).
pub(crate) fn simplify(n: &Node) -> Node {
    match n {
        Node::Seq(items) => seq(items.iter().map(simplify).collect()),
        Node::Alt(alts) => Node::Alt(alts.iter().map(simplify).collect()),
        Node::Group(i, b) => Node::Group(*i, Box::new(simplify(b))),
        Node::Repeat {
            body,
            min,
            max,
            greedy,
        } => {
            let body = simplify(body);
            let (mut min, mut max) = (*min, *max);
            if len_range(&body).1 == Some(0) {
                max = Some(min);
                // Every iteration runs at the same position in the same state, so without
                // captures or backreferences the first one decides them all.
                if min > 1 && group_slots(&body).is_none() && !has_backref(&body) {
                    (min, max) = (1, Some(1));
                }
            }
            if max == Some(0) {
                return Node::Empty;
            }
            if (min, max) == (1, Some(1)) {
                return body;
            }
            Node::Repeat {
                body: Box::new(body),
                min,
                max,
                greedy: *greedy,
            }
        }
        Node::Look {
            body,
            behind,
            negative,
        } => Node::Look {
            body: Box::new(tail(simplify(body), *behind, *negative)),
            behind: *behind,
            negative: *negative,
        },
        other => other.clone(),
    }
}

/// Rewrites the part of a lookaround body matched last. Once the body gets there, a
/// trailing quantifier `x{min,max}` succeeds exactly when `x{min}` does, and the position
/// it ends at is thrown away; so unless it holds captures the result can show (any capture
/// in a negative lookaround is thrown away too), it can be cut to its minimum.
fn tail(n: Node, behind: bool, negative: bool) -> Node {
    match n {
        Node::Repeat {
            body,
            min,
            max: _,
            greedy,
        } if negative || group_slots(&body).is_none() => {
            if min == 0 {
                Node::Empty
            } else {
                Node::Repeat {
                    body,
                    min,
                    max: Some(min),
                    greedy,
                }
            }
        }
        Node::Seq(mut items) => {
            loop {
                let last = if behind { items.first() } else { items.last() };
                let Some(last) = last.cloned() else { break };
                let new = tail(last, behind, negative);
                let empty = matches!(new, Node::Empty);
                if behind {
                    items[0] = new;
                } else {
                    let k = items.len() - 1;
                    items[k] = new;
                }
                if !empty {
                    break;
                }
                if behind {
                    items.remove(0);
                } else {
                    items.pop();
                }
            }
            seq(items)
        }
        Node::Alt(alts) => Node::Alt(
            alts.into_iter()
                .map(|a| tail(a, behind, negative))
                .collect(),
        ),
        Node::Group(i, b) if negative => Node::Group(i, Box::new(tail(*b, behind, negative))),
        other => other,
    }
}

/// An upper bound on the instructions `n` compiles to (for the expansion decision).
pub(crate) fn estimate(n: &Node) -> u64 {
    match n {
        Node::Empty => 0,
        Node::Char(_) | Node::Set(_) | Node::Assert(_) | Node::BackRef { .. } => 1,
        Node::Seq(v) => v.iter().map(estimate).fold(0, u64::saturating_add),
        Node::Alt(v) => v
            .iter()
            .map(|a| estimate(a).saturating_add(2))
            .fold(0, u64::saturating_add),
        Node::Group(_, b) | Node::Look { body: b, .. } => estimate(b).saturating_add(2),
        Node::Repeat { body, min, max, .. } => {
            let b = estimate(body).saturating_add(6);
            match (min, max) {
                (_, Some(0)) => 0,
                (0, None) | (1, None) | (0, Some(1)) => b,
                _ => {
                    let copies = max.unwrap_or(*min).max(*min).saturating_add(1);
                    let expanded = copies.saturating_mul(b);
                    if expanded <= EXPAND_LIMIT {
                        expanded
                    } else {
                        b
                    }
                }
            }
        }
    }
}
