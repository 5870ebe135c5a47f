//! Behaviors: a trigger (event kinds, a feed, or a schedule) and a reaction script that runs in
//! the sandbox with the authority of the least privileged principal who shaped it (created or
//! changed it: [`Behavior::shapers`], `lore_directory::caller::least_of`). Stored and validated here, with each
//! schedule's next run ([`Due`]); `runs::reactions` and `runs::schedules` run them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ByName, Done, check_name, now_text, require, to_bytes};
use lore_base::error::{LoreError, Result};
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_directory::Caller;

/// When a behavior fires. At least one of the fields is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// Fire on new events of these kinds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_kinds: Vec<String>,
    /// Fire on new items of this feed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
    /// Fire on a schedule: `every 15m`, `every 2h`, `every 1d` (at least a minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// A behavior.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Behavior {
    pub name: String,
    pub description: String,
    pub trigger: Trigger,
    /// The reaction script (TypeScript; the triggering event is `ctx.args.event`).
    pub code: String,
    pub enabled: bool,
    /// The principal who created it.
    pub owner: String,
    /// Every principal who changed it since, oldest first (each once). The reaction runs with
    /// the least role among the owner and these, as they are now: an admin who edits an
    /// owner's behavior makes it run as an admin, never the admin's code as the owner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_by: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// `behaviors.create`
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBehavior {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub trigger: Trigger,
    pub code: String,
    /// Default true.
    pub enabled: Option<bool>,
}

/// `behaviors.update`: only the fields given change.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBehavior {
    pub name: String,
    pub description: Option<String>,
    pub trigger: Option<Trigger>,
    pub code: Option<String>,
    pub enabled: Option<bool>,
}

/// Seconds in a schedule like `every 15m`.
pub fn schedule_seconds(schedule: &str) -> Option<u64> {
    let spec = schedule.trim().strip_prefix("every ")?.trim();
    let unit = spec.chars().last()?;
    let n: u64 = spec[..spec.len() - unit.len_utf8()].trim().parse().ok()?;
    let seconds = n.checked_mul(match unit {
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return None,
    })?;
    (seconds >= 60).then_some(seconds)
}

fn check_trigger(t: &Trigger) -> Result<()> {
    if t.event_kinds.is_empty() && t.feed.is_none() && t.schedule.is_none() {
        return Err(LoreError::invalid(
            "trigger",
            "give event_kinds, a feed or a schedule",
        ));
    }
    for (i, k) in t.event_kinds.iter().enumerate() {
        check_name(&format!("trigger/event_kinds/{i}"), k)?;
    }
    if let Some(f) = &t.feed {
        check_name("trigger/feed", f)?;
    }
    if let Some(s) = &t.schedule
        && schedule_seconds(s).is_none()
    {
        return Err(LoreError::invalid(
            "trigger/schedule",
            format!("{s:?} is not a schedule: use `every <n>m`, `every <n>h` or `every <n>d`"),
        ));
    }
    Ok(())
}

fn check_code(code: &str) -> Result<()> {
    if code.trim().is_empty() || code.len() > 64 * 1024 {
        return Err(LoreError::invalid(
            "code",
            "give a script of 1 byte to 64 KiB",
        ));
    }
    Ok(())
}

pub async fn get(ports: &Ports, caller: &Caller, name: &str) -> Result<Behavior> {
    check_name("name", name)?;
    require(
        ports,
        &caller.keys().named("beh", name),
        format!("behavior {name:?} in org {}", caller.org()),
    )
    .await
}

pub async fn list(ports: &Ports, caller: &Caller) -> Result<Vec<Behavior>> {
    super::all(ports, &caller.keys().all_named("beh")).await
}

impl Behavior {
    /// The principals who shaped it: its owner, then each who changed it.
    pub fn shapers(&self) -> Vec<String> {
        let mut all = vec![self.owner.clone()];
        all.extend(self.changed_by.iter().cloned());
        all
    }
}

/// Notes that `principal` changed stored code whose creator is `owner` and whose editors so
/// far are `changed_by`: it is added once, at the end (the latest of equals runs it).
pub fn shaped_by(owner: &str, changed_by: &mut Vec<String>, principal: &str) {
    changed_by.retain(|p| p != principal);
    if owner != principal {
        changed_by.push(principal.to_string());
    }
}

/// When a behavior's schedule next runs, kept beside it (`o/{org}/sched/{name}`) while it is
/// enabled and has a schedule. A run claims its due time by replacing this record under a
/// precondition, so each due time fires once, whichever instance or process gets there first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Due {
    /// Milliseconds since the epoch.
    pub next_at_ms: i64,
}

/// The seconds between runs of `b`'s schedule, if it is enabled and has one.
pub fn active_schedule(b: &Behavior) -> Option<u64> {
    b.trigger
        .schedule
        .as_deref()
        .filter(|_| b.enabled)
        .and_then(schedule_seconds)
}

/// Adds to `batch` what keeps `new`'s schedule (`old`: the behavior it replaces): its first
/// run one interval from now when the schedule is new or changed, nothing when it is the same,
/// its removal when it has none; and the org's entry in the index of orgs with schedules.
/// Returns the time of a run it set, for the host to be woken at.
fn keep_schedule(
    ports: &Ports,
    caller: &Caller,
    batch: &mut Batch,
    old: Option<&Behavior>,
    new: Option<&Behavior>,
) -> Option<i64> {
    let name = new.or(old).map(|b| b.name.as_str())?;
    let key = caller.keys().schedule(name);
    let Some(seconds) = new.and_then(active_schedule) else {
        if old.and_then(active_schedule).is_some() {
            batch.delete(&key);
        }
        return None;
    };
    if old.is_some_and(|o| active_schedule(o) == Some(seconds)) {
        return None;
    }
    let next_at_ms = ports.clock.now_ms() + i64::try_from(seconds).unwrap_or(i64::MAX / 2) * 1000;
    batch.put(&key, to_bytes(&Due { next_at_ms }));
    batch.put(
        lore_base::keys::scheduled_org(caller.org()),
        ports.random_hex(8).into_bytes(),
    );
    Some(next_at_ms)
}

/// Tells the host when the caller's org next has a schedule to run.
fn wake(ports: &Ports, caller: &Caller, at: Option<i64>) {
    if let (Some(at), Some(background)) = (at, &ports.background) {
        background.wake(caller.org().as_str(), at);
    }
}

pub async fn create(ports: &Ports, caller: &Caller, args: CreateBehavior) -> Result<Behavior> {
    check_name("name", &args.name)?;
    check_trigger(&args.trigger)?;
    check_code(&args.code)?;
    let now = now_text(ports);
    let behavior = Behavior {
        name: args.name,
        description: args.description,
        trigger: args.trigger,
        code: args.code,
        enabled: args.enabled.unwrap_or(true),
        owner: caller.principal().id.clone(),
        changed_by: Vec::new(),
        created_at: now.clone(),
        updated_at: now,
    };
    let key = caller.keys().named("beh", &behavior.name);
    let mut batch = Batch::new();
    batch.require_absent(&key).put(&key, to_bytes(&behavior));
    let due = keep_schedule(ports, caller, &mut batch, None, Some(&behavior));
    super::commit_new(ports, batch, || format!("behavior {:?}", behavior.name)).await?;
    wake(ports, caller, due);
    Ok(behavior)
}

pub async fn update(ports: &Ports, caller: &Caller, args: UpdateBehavior) -> Result<Behavior> {
    let old = get(ports, caller, &args.name).await?;
    let mut b = old.clone();
    if let Some(d) = args.description {
        b.description = d;
    }
    if let Some(t) = args.trigger {
        check_trigger(&t)?;
        b.trigger = t;
    }
    if let Some(c) = args.code {
        check_code(&c)?;
        b.code = c;
    }
    if let Some(e) = args.enabled {
        b.enabled = e;
    }
    shaped_by(&b.owner, &mut b.changed_by, &caller.principal().id);
    b.updated_at = now_text(ports);
    let key = caller.keys().named("beh", &b.name);
    let mut batch = Batch::new();
    batch
        .require_equals(&key, to_bytes(&old))
        .put(&key, to_bytes(&b));
    let due = keep_schedule(ports, caller, &mut batch, Some(&old), Some(&b));
    ports.storage.commit(batch).await?;
    wake(ports, caller, due);
    Ok(b)
}

pub async fn delete(ports: &Ports, caller: &Caller, args: ByName) -> Result<Done> {
    let old = get(ports, caller, &args.name).await?;
    let key = caller.keys().named("beh", &old.name);
    let mut batch = Batch::new();
    batch.require_equals(&key, to_bytes(&old)).delete(&key);
    keep_schedule(ports, caller, &mut batch, Some(&old), None);
    ports.storage.commit(batch).await?;
    Ok(Done { ok: true })
}

/// The behaviors of the org `keys` belong to (reactions run without a caller until the owner
/// is resolved).
pub async fn list_in(ports: &Ports, keys: &lore_base::keys::OrgKeys) -> Result<Vec<Behavior>> {
    super::all(ports, &keys.all_named("beh")).await
}

/// Whether `event` fires `trigger`: its kind is one of the trigger's event kinds, or it came
/// from the trigger's feed. Schedules fire nothing here (`runs::schedules` runs them).
pub fn fires(trigger: &Trigger, event: &lore_memory::event::Event) -> bool {
    trigger.event_kinds.contains(&event.kind)
        || trigger
            .feed
            .as_ref()
            .is_some_and(|f| event.author.strip_prefix("feed:") == Some(f.as_str()))
}
