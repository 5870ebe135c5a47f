//! Rate limits (SPEC 10): a token bucket per token and one per org, checked when a request is
//! authenticated (MCP and REST). Over a limit the request gets HTTP 429 with `Retry-After` and
//! an error naming the limit. The server sets the limits (`Config::rate_limits`); an org's
//! admins may lower them for their org (`organizations.update {rate_limits}`), never raise them.
//!
//! The buckets live behind the [`RateLimiter`] port, attached to a core instance with
//! `Lore::with_rate_limiter`: [`MemoryLimiter`] natively (one per process, shared by every
//! worker thread), and the platform's own facility at the edge. Every implementation runs the
//! same arithmetic, [`take`], on a stored [`Bucket`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Requests per minute for each token and for each org; `0` means no limit at that level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RateLimits {
    /// Requests per minute one token may make.
    pub token_per_minute: u32,
    /// Requests per minute all of an org's tokens may make together.
    pub org_per_minute: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            token_per_minute: 600,
            org_per_minute: 3_000,
        }
    }
}

/// An org's own, lower limits (`organizations.update {rate_limits}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrgRateLimits {
    /// Requests per minute one token may make; at most the server's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub token_per_minute: Option<u32>,
    /// Requests per minute the org's tokens may make together; at most the server's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub org_per_minute: Option<u32>,
}

impl RateLimits {
    /// The limits that apply to an org: the server's, lowered by the org's own.
    pub fn for_org(self, own: Option<OrgRateLimits>) -> Self {
        let own = own.unwrap_or_default();
        let lower = |server: u32, org: Option<u32>| match (server, org) {
            (0, Some(o)) => o,
            (s, Some(o)) => s.min(o),
            (s, None) => s,
        };
        Self {
            token_per_minute: lower(self.token_per_minute, own.token_per_minute),
            org_per_minute: lower(self.org_per_minute, own.org_per_minute),
        }
    }
}

/// How many requests a bucket holds at most: ten seconds' worth, and at least one.
pub fn burst(per_minute: u32) -> f64 {
    (f64::from(per_minute) / 6.0).max(1.0)
}

/// One bucket's state, as a limiter stores it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    pub tokens: f64,
    pub at_ms: i64,
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// `None`: allowed. Else the index of the first bucket without room, and how long until
    /// one request fits in it.
    pub refused: Option<(usize, u64)>,
}

impl Decision {
    pub const ALLOWED: Self = Self { refused: None };
}

/// Refills a bucket (a new one starts full) to `now_ms` at `per_minute`.
fn refill(bucket: Option<Bucket>, per_minute: u32, now_ms: i64) -> Bucket {
    let capacity = burst(per_minute);
    let per_ms = f64::from(per_minute) / 60_000.0;
    let mut b = bucket.unwrap_or(Bucket {
        tokens: capacity,
        at_ms: now_ms,
    });
    let elapsed = (now_ms - b.at_ms).max(0) as f64;
    b.tokens = (b.tokens + elapsed * per_ms).min(capacity);
    b.at_ms = now_ms.max(b.at_ms);
    b
}

/// Takes one request from every bucket if each has room, else from none: the states to store
/// and the decision. `rates[i]` refills `buckets[i]`.
pub fn take(buckets: &[Option<Bucket>], rates: &[u32], now_ms: i64) -> (Vec<Bucket>, Decision) {
    let mut states: Vec<Bucket> = buckets
        .iter()
        .zip(rates)
        .map(|(b, r)| refill(*b, *r, now_ms))
        .collect();
    for (i, (b, rate)) in states.iter().zip(rates).enumerate() {
        if b.tokens < 1.0 {
            let per_ms = f64::from(*rate) / 60_000.0;
            let wait = ((1.0 - b.tokens) / per_ms).ceil().max(1.0) as u64;
            return (
                states,
                Decision {
                    refused: Some((i, wait)),
                },
            );
        }
    }
    for b in &mut states {
        b.tokens -= 1.0;
    }
    (states, Decision::ALLOWED)
}

pub type DecisionFuture<'a> = Pin<Box<dyn Future<Output = Decision> + 'a>>;

/// Where buckets live. An implementation that cannot reach its store lets the request through
/// (and logs it): a limiter outage must not become an outage of lore.
pub trait RateLimiter {
    /// Takes one request from each of `buckets` (key, requests per minute) if every one has
    /// room, else from none. `scope` (the org) groups the buckets one request checks together,
    /// for stores that place them by it.
    fn take(&self, scope: &str, buckets: &[(String, u32)], now_ms: i64) -> DecisionFuture<'_>;
}

/// Buckets in this process's memory, shared by every clone (one per worker thread). Buckets
/// idle long enough to be full again are dropped once there are many.
#[derive(Clone, Default)]
pub struct MemoryLimiter {
    buckets: Arc<Mutex<HashMap<String, (Bucket, u32)>>>,
}

/// Past this many buckets, full ones are swept out.
const SWEEP_AT: usize = 50_000;

impl RateLimiter for MemoryLimiter {
    fn take(&self, _scope: &str, buckets: &[(String, u32)], now_ms: i64) -> DecisionFuture<'_> {
        let decision = match self.buckets.lock() {
            Ok(mut map) => {
                if map.len() >= SWEEP_AT {
                    map.retain(|_, (b, rate)| {
                        refill(Some(*b), *rate, now_ms).tokens < burst(*rate)
                    });
                }
                let old: Vec<Option<Bucket>> = buckets
                    .iter()
                    .map(|(k, _)| map.get(k).map(|(b, _)| *b))
                    .collect();
                let rates: Vec<u32> = buckets.iter().map(|(_, r)| *r).collect();
                let (states, decision) = take(&old, &rates, now_ms);
                for ((key, rate), state) in buckets.iter().zip(states) {
                    map.insert(key.clone(), (state, *rate));
                }
                decision
            }
            Err(_) => Decision::ALLOWED,
        };
        Box::pin(std::future::ready(decision))
    }
}

/// How many scripts may run at once in a process (`lore serve --max-scripts`), and the share
/// of them one org and one token may hold (`--max-scripts-per-org`, `--max-scripts-per-token`):
/// each run of a tool's script holds a slot; past a limit a run is refused at once
/// (`overloaded`, saying whose share is full) instead of queueing behind the others, so no org
/// can take every slot. Clones share the slots.
#[derive(Clone, Debug)]
pub struct ScriptSlots {
    held: Arc<std::sync::Mutex<Held>>,
    max: usize,
    per_org: usize,
    per_token: usize,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_org: HashMap<String, usize>,
    by_token: HashMap<String, usize>,
}

/// A held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct ScriptSlot {
    held: Arc<std::sync::Mutex<Held>>,
    org: String,
    token: String,
}

impl Drop for ScriptSlot {
    fn drop(&mut self) {
        let mut guard = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let held = &mut *guard;
        held.total = held.total.saturating_sub(1);
        for (map, key) in [
            (&mut held.by_org, &self.org),
            (&mut held.by_token, &self.token),
        ] {
            if let Some(n) = map.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(key);
                }
            }
        }
    }
}

/// Whose share of the script slots is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotsFull {
    Server { max: usize },
    Org { max: usize },
    Token { max: usize },
}

impl SlotsFull {
    /// The refusal, in words that say whose share is full.
    pub fn message(self, org: &str) -> String {
        match self {
            Self::Server { max } => format!(
                "{max} scripts are already running on this server, its limit; try again in a moment"
            ),
            Self::Org { max } => format!(
                "org {org} already runs {max} scripts at once, its share of this server; wait for one to finish"
            ),
            Self::Token { max } => format!(
                "this token already runs {max} scripts at once, its share; wait for one to finish or use another agent's token"
            ),
        }
    }
}

impl ScriptSlots {
    /// `max` slots in all; an org may hold half of them and a token a quarter (at least one).
    pub fn new(max: usize) -> Self {
        Self::with_shares(max, (max / 2).max(1), (max / 4).max(1))
    }

    pub fn with_shares(max: usize, per_org: usize, per_token: usize) -> Self {
        Self {
            held: Arc::default(),
            max,
            per_org: per_org.min(max).max(1),
            per_token: per_token.min(per_org).min(max).max(1),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn per_org(&self) -> usize {
        self.per_org
    }

    pub fn per_token(&self) -> usize {
        self.per_token
    }

    /// A slot for a run of `org` by `token`, if the server, the org and the token each have
    /// one free; else whose share is full.
    pub fn try_take(&self, org: &str, token: &str) -> Result<ScriptSlot, SlotsFull> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.total >= self.max {
            return Err(SlotsFull::Server { max: self.max });
        }
        if held.by_org.get(org).copied().unwrap_or(0) >= self.per_org {
            return Err(SlotsFull::Org { max: self.per_org });
        }
        if held.by_token.get(token).copied().unwrap_or(0) >= self.per_token {
            return Err(SlotsFull::Token {
                max: self.per_token,
            });
        }
        held.total += 1;
        *held.by_org.entry(org.to_string()).or_default() += 1;
        *held.by_token.entry(token.to_string()).or_default() += 1;
        Ok(ScriptSlot {
            held: self.held.clone(),
            org: org.to_string(),
            token: token.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        // 60 per minute: one per second, a burst of 10.
        let mut bucket = vec![None];
        for i in 0..10 {
            let (b, d) = take(&bucket, &[60], 1_000);
            assert_eq!(d, Decision::ALLOWED, "request {i}");
            bucket = vec![Some(b[0])];
        }
        let (b, d) = take(&bucket, &[60], 1_000);
        assert_eq!(d.refused, Some((0, 1_000)));
        let (b, d) = take(&[Some(b[0])], &[60], 1_500);
        assert_eq!(d.refused, Some((0, 500)));
        let (_, d) = take(&[Some(b[0])], &[60], 2_000);
        assert_eq!(d, Decision::ALLOWED);
    }

    #[test]
    fn a_refused_request_takes_from_no_bucket() {
        let empty = Bucket {
            tokens: 0.0,
            at_ms: 0,
        };
        let (states, d) = take(&[None, Some(empty)], &[60, 60], 0);
        assert_eq!(d.refused, Some((1, 1_000)));
        assert_eq!(
            states[0].tokens,
            burst(60),
            "the first bucket kept its request"
        );
    }

    #[test]
    fn an_org_may_lower_its_limits_but_not_raise_them() {
        let server = RateLimits {
            token_per_minute: 600,
            org_per_minute: 0,
        };
        let own = OrgRateLimits {
            token_per_minute: Some(6_000),
            org_per_minute: Some(100),
        };
        assert_eq!(
            server.for_org(Some(own)),
            RateLimits {
                token_per_minute: 600,
                org_per_minute: 100
            }
        );
        assert_eq!(server.for_org(None), server);
    }

    #[test]
    fn script_slots_are_freed_when_dropped() {
        let slots = ScriptSlots::with_shares(2, 2, 2);
        let a = slots.try_take("o", "t").unwrap();
        let _b = slots.clone().try_take("o", "t").unwrap();
        assert_eq!(
            slots.try_take("p", "u").unwrap_err(),
            SlotsFull::Server { max: 2 }
        );
        drop(a);
        assert!(slots.try_take("o", "t").is_ok());
    }

    #[test]
    fn one_org_or_token_holds_only_its_share_of_the_slots() {
        let slots = ScriptSlots::new(8);
        assert_eq!((slots.per_org(), slots.per_token()), (4, 2));
        let mut held = Vec::new();
        // One token: two slots.
        held.push(slots.try_take("a", "a1").unwrap());
        held.push(slots.try_take("a", "a1").unwrap());
        assert_eq!(
            slots.try_take("a", "a1").unwrap_err(),
            SlotsFull::Token { max: 2 }
        );
        // The org's other tokens: two more, then the org's share is full.
        held.push(slots.try_take("a", "a2").unwrap());
        held.push(slots.try_take("a", "a3").unwrap());
        assert_eq!(
            slots.try_take("a", "a4").unwrap_err(),
            SlotsFull::Org { max: 4 }
        );
        // Another org still runs its scripts.
        for t in ["b1", "b1", "b2", "b2"] {
            held.push(slots.try_take("b", t).unwrap());
        }
        assert_eq!(
            slots.try_take("c", "c1").unwrap_err(),
            SlotsFull::Server { max: 8 }
        );
        held.clear();
        assert!(slots.try_take("c", "c1").is_ok());
        assert!(SlotsFull::Org { max: 4 }.message("a").contains("org a"));
    }

    #[test]
    fn the_memory_limiter_keeps_keys_apart() {
        let limiter = MemoryLimiter::default();
        let run = |key: &str, now: i64| {
            futures_executor::block_on(limiter.take("org", &[(key.to_string(), 6)], now))
        };
        assert_eq!(run("a", 0), Decision::ALLOWED);
        assert!(run("a", 0).refused.is_some(), "a burst of 1");
        assert_eq!(
            run("b", 0),
            Decision::ALLOWED,
            "another key has its own bucket"
        );
        assert_eq!(run("a", 10_000), Decision::ALLOWED, "refilled after 10 s");
    }
}
