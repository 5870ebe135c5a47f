//! Behaviors' schedule triggers (`every 15m`): each enabled behavior with a schedule has its
//! next run stored beside it ([`Due`], written with the behavior), and [`run_due`] runs an
//! org's due ones. The host decides when to call it, the core what it does:
//!
//! - Workers: the org object's alarm, set to the org's next due time ([`Background::wake`]
//!   when a schedule is set, and again by every run);
//! - `lore serve`: a timer on one worker thread passes over the orgs with schedules
//!   ([`run_every_org`], the index `sched/{org}`) every [`PASS_EVERY_MS`];
//! - Spin, where nothing outlives a request: the operator route `schedules`, called by a cron
//!   (any scheduler that can POST), which makes the same pass.
//!
//! A run first claims its due time: it replaces the [`Due`] record with the next one under a
//! precondition, so a due time fires once however many hosts pass at once. Runs missed while
//! nothing passed (a server down for an hour) are not made up: the next due time is the first
//! one after now on the schedule's own cadence. A run is a reaction (`runs::reactions`) with
//! no triggering event: its owner's permissions as they are now, the same caps, an Action with
//! `source: "behavior"`, and `ctx.args.schedule` (`every`, `due_at`, `fired_at`); its own
//! writes set off reactions one level deep, like a reaction's.
//!
//! [`Background::wake`]: lore_base::ports::Background::wake

use serde_json::{Value, json};

use super::reactions::run_behavior;
use super::run::Origin;
use crate::instance::Engine;
use lore_base::error::LoreError;
use lore_base::ids::OrgId;
use lore_base::keys::{self, OrgKeys};
use lore_base::storage::{Batch, StorageError};
use lore_base::time::format_time;
use lore_records::behaviors::{self, Behavior, Due};
use lore_records::to_bytes;

/// How often `lore serve` passes over the orgs with schedules (the shortest schedule is a
/// minute).
pub const PASS_EVERY_MS: u64 = 20_000;

/// What one org's pass did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct OrgPass {
    /// Runs made (each is an Action, whatever its outcome).
    pub fired: u32,
    /// The earliest due time left, if the org has schedules.
    pub next_at_ms: Option<i64>,
}

/// The due time after `now_ms` on the cadence of `due_ms`, every `every_ms`.
fn next_after(due_ms: i64, every_ms: i64, now_ms: i64) -> i64 {
    let missed = (now_ms - due_ms).max(0) / every_ms;
    due_ms + (missed + 1) * every_ms
}

/// Runs `org`'s schedules that are due at `now_ms`, one after another, and says when the next
/// is due. A schedule whose behavior is gone, disabled or without a schedule is removed.
pub async fn run_due(engine: &Engine, org: &OrgId, now_ms: i64) -> Result<OrgPass, LoreError> {
    let keys = OrgKeys::new(org);
    let prefix = keys.schedules();
    let mut pass = OrgPass::default();
    for (key, bytes) in engine.ports.storage.scan_all(&prefix).await? {
        let name = &key[prefix.len()..];
        let next = run_one(engine, org, &keys, name, &key, &bytes, now_ms, &mut pass).await?;
        if let Some(next) = next {
            pass.next_at_ms = Some(pass.next_at_ms.map_or(next, |n| n.min(next)));
        }
    }
    Ok(pass)
}

/// One schedule entry: runs it if it is due and still wanted; returns its next due time, or
/// `None` once it is removed.
#[allow(clippy::too_many_arguments)]
async fn run_one(
    engine: &Engine,
    org: &OrgId,
    keys: &OrgKeys,
    name: &str,
    key: &str,
    bytes: &[u8],
    now_ms: i64,
    pass: &mut OrgPass,
) -> Result<Option<i64>, LoreError> {
    let ports = &engine.ports;
    let due: Option<Due> = serde_json::from_slice(bytes).ok();
    if let Some(due) = &due
        && due.next_at_ms > now_ms
    {
        return Ok(Some(due.next_at_ms));
    }
    let behavior: Option<Behavior> = ports.record(&keys.named("beh", name)).await?;
    let wanted = behavior
        .as_ref()
        .and_then(|b| behaviors::active_schedule(b).map(|s| (b, s)));
    let mut claim = Batch::new();
    claim.require_equals(key, bytes.to_vec());
    let Some((behavior, seconds)) = wanted else {
        claim.delete(key);
        return match ports.storage.commit(claim).await {
            Ok(()) | Err(StorageError::Conflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        };
    };
    let every_ms = i64::try_from(seconds).unwrap_or(i64::MAX / 2_000) * 1000;
    // An unreadable entry (never written so by lore) starts the schedule over.
    let due_ms = due.map_or(now_ms, |d| d.next_at_ms);
    let next_at_ms = next_after(due_ms, every_ms, now_ms);
    claim.put(key, to_bytes(&Due { next_at_ms }));
    match ports.storage.commit(claim).await {
        Ok(()) => {}
        // Another host claimed this due time: it runs it.
        Err(StorageError::Conflict { .. }) => return Ok(Some(next_at_ms)),
        Err(e) => return Err(e.into()),
    }
    fire(engine, org, keys, behavior, seconds, due_ms, now_ms).await;
    pass.fired += 1;
    Ok(Some(next_at_ms))
}

/// Runs `behavior`'s script for its due time, as its owner; its outcome is its Action.
async fn fire(
    engine: &Engine,
    org: &OrgId,
    keys: &OrgKeys,
    behavior: &Behavior,
    seconds: u64,
    due_ms: i64,
    now_ms: i64,
) {
    let origin = Origin {
        behavior: Some(behavior.name.clone()),
        trigger_event: None,
        depth: Some(1),
        operation: None,
    };
    let schedule = json!({
        "every": behavior.trigger.schedule,
        "seconds": seconds,
        "due_at": format_time(due_ms),
        "fired_at": format_time(now_ms),
    });
    let args = json!({ "schedule": schedule, "behavior": behavior.name });
    run_behavior(engine, org, keys, behavior, origin, args).await;
}

/// Gives every enabled behavior of `org` with a schedule and no stored next run (one saved
/// before schedules ran) its first run one interval after `now`, and indexes the org. Returns
/// the earliest next run it set.
pub async fn adopt(engine: &Engine, org: &OrgId, now: i64) -> Result<Option<i64>, LoreError> {
    let ports = &engine.ports;
    let keys = OrgKeys::new(org);
    let mut earliest: Option<i64> = None;
    for b in behaviors::list_in(ports, &keys).await? {
        let Some(seconds) = behaviors::active_schedule(&b) else {
            continue;
        };
        let key = keys.schedule(&b.name);
        let next_at_ms = now + i64::try_from(seconds).unwrap_or(i64::MAX / 2_000) * 1000;
        let mut batch = Batch::new();
        batch
            .require_absent(&key)
            .put(&key, to_bytes(&Due { next_at_ms }))
            .put(keys::scheduled_org(org), ports.random_hex(8).into_bytes());
        match ports.storage.commit(batch).await {
            Ok(()) => earliest = Some(earliest.map_or(next_at_ms, |e| e.min(next_at_ms))),
            Err(StorageError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(earliest)
}

/// A pass over every org in the index of orgs with schedules (`lore serve`'s timer, the
/// operator route `schedules`): where the host wakes each org itself ([`Background::wake`]:
/// Workers) the org is woken at its next due time, which runs it there; elsewhere its due
/// schedules run here. An org left with none leaves the index. With `adopt`, every org is
/// visited first and given the stored runs it lacks (`adopt`).
///
/// [`Background::wake`]: lore_base::ports::Background::wake
pub async fn run_every_org(engine: &Engine, now_ms: i64, adopt_all: bool) -> Value {
    let ports = &engine.ports;
    let mut errors = Vec::new();
    if adopt_all {
        match lore_directory::admin::list_orgs(ports).await {
            Ok(orgs) => {
                for org in orgs {
                    if let Err(e) = adopt(engine, &org.id, now_ms).await {
                        errors.push(json!({ "org": org.id, "error": e.to_json() }));
                    }
                }
            }
            Err(e) => errors.push(json!({ "error": e.to_json() })),
        }
    }
    let (mut orgs, mut fired, mut woken) = (0u32, 0u32, 0u32);
    let indexed = match ports.storage.scan_all(keys::SCHEDULED_ORGS).await {
        Ok(entries) => entries,
        Err(e) => {
            errors.push(json!({ "error": LoreError::from(e).to_json() }));
            Vec::new()
        }
    };
    for (key, marker) in indexed {
        let Ok(org) = OrgId::parse(&key[keys::SCHEDULED_ORGS.len()..]) else {
            continue;
        };
        orgs += 1;
        let next = match &ports.background {
            Some(background) if background.wakes_orgs() => {
                let next = next_due(engine, &org).await;
                if let Ok(Some(at)) = next {
                    background.wake(org.as_str(), at);
                    woken += 1;
                }
                next
            }
            _ => run_due(engine, &org, now_ms).await.map(|p| {
                fired += p.fired;
                p.next_at_ms
            }),
        };
        match next {
            Ok(Some(_)) => {}
            Ok(None) => {
                let mut batch = Batch::new();
                batch.require_equals(&key, marker).delete(&key);
                // A conflict: a schedule was set meanwhile, and the org stays.
                let _ = ports.storage.commit(batch).await;
            }
            Err(e) => errors.push(json!({ "org": org, "error": e.to_json() })),
        }
    }
    json!({ "orgs": orgs, "fired": fired, "woken": woken, "errors": errors })
}

/// The earliest due time among `org`'s schedules, without running any.
pub async fn next_due(engine: &Engine, org: &OrgId) -> Result<Option<i64>, LoreError> {
    let entries = engine
        .ports
        .storage
        .scan_all(&OrgKeys::new(org).schedules())
        .await?;
    // An unreadable entry is due now: the run repairs it.
    Ok(entries
        .iter()
        .map(|(_, bytes)| serde_json::from_slice::<Due>(bytes).map_or(0, |d| d.next_at_ms))
        .min())
}

#[cfg(test)]
mod tests {
    use super::next_after;

    #[test]
    fn missed_runs_are_not_made_up() {
        assert_eq!(next_after(1_000, 60_000, 1_000), 61_000);
        assert_eq!(next_after(1_000, 60_000, 1_500), 61_000);
        assert_eq!(next_after(1_000, 60_000, 61_000), 121_000);
        assert_eq!(next_after(1_000, 60_000, 3_600_000), 3_601_000);
    }
}
