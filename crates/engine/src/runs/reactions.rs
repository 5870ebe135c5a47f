//! Behaviors' reactions (issue 4 item 9): when new events commit, each enabled behavior whose
//! trigger they match (an event kind, or the feed they came from) runs its reaction script in
//! the same runner as `run_sdk`, with the behavior owner's permissions as they are now, the
//! same caps, and the event as `ctx.args.event`. Each reaction is an Action (`source:
//! "behavior"`, the behavior, the triggering event, the depth).
//!
//! - *After the commit*: `Engine::after_commit` calls `react` once the triggering
//!   batch has committed; events a script saves wait for that script's own commit, so a run
//!   that fails triggers nothing.
//! - *Never fails the write*: the reaction's outcome is only recorded.
//! - *When*: where the host has a background port (`Ports::background`: `lore serve`, a local
//!   task of the worker thread; Workers, the request's `waitUntil`), after the triggering
//!   request is answered; elsewhere (Spin, where work cannot outlive the request) inline,
//!   before the answer.
//! - *Bounded*: a reaction's own writes may trigger reactions, down to [`MAX_DEPTH`]; a
//!   reaction that would go deeper is not run and is recorded as `skipped`
//!   (`reaction_depth`), so a behavior that triggers itself runs twice, then stops.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};

use super::run::{Origin, Spec, run_script};
use crate::instance::Engine;
use lore_base::ids::OrgId;
use lore_base::keys::OrgKeys;
use lore_base::model::Tier;
use lore_base::time::format_time;
use lore_memory::event::Event;
use lore_records::actions::Action;
use lore_records::behaviors::{self, Behavior};

/// Reactions to a request's writes are depth 1, reactions to those reactions' writes depth 2;
/// deeper ones are skipped.
pub const MAX_DEPTH: u8 = 2;

/// Runs the reactions that `events` (just committed in `org`) trigger, one after another.
pub fn react<'a>(
    engine: &'a Engine,
    org: &'a OrgId,
    events: &'a [Event],
) -> Pin<Box<dyn Future<Output = ()> + 'a>> {
    Box::pin(async move {
        let keys = OrgKeys::new(org);
        let all = match behaviors::list_in(&engine.ports, &keys).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, %org, "could not read the behaviors to react to new events");
                return;
            }
        };
        let depth = engine.reaction_depth.saturating_add(1);
        for event in events {
            for behavior in all
                .iter()
                .filter(|b| b.enabled && behaviors::fires(&b.trigger, event))
            {
                react_one(engine, org, &keys, behavior, event, depth).await;
            }
        }
    })
}

/// The event as the reaction sees it (`ctx.args.event`): as `memory.get` returns it.
pub fn event_json(event: &Event) -> Value {
    let mut v = json!({
        "id": event.id,
        "kind": event.kind,
        "content": event.content,
        "entity_ids": event.entity_ids,
        "author": event.author,
        "created_at": format_time(event.created_at_ms),
    });
    if let Some(p) = &event.payload {
        v["payload"] = p.clone();
    }
    if let Some(s) = &event.supersedes_event_id {
        v["supersedes_event_id"] = json!(s);
    }
    v
}

async fn react_one(
    engine: &Engine,
    org: &OrgId,
    keys: &OrgKeys,
    behavior: &Behavior,
    event: &Event,
    depth: u8,
) {
    let origin = Origin {
        behavior: Some(behavior.name.clone()),
        trigger_event: Some(event.id.clone()),
        depth: Some(depth),
        operation: None,
    };
    if depth > MAX_DEPTH {
        let message = format!(
            "not run: event {} was written by a reaction {} deep, and reactions go at most {MAX_DEPTH} deep",
            event.id,
            depth - 1
        );
        record_skipped(
            engine,
            keys,
            behavior,
            origin,
            "skipped",
            "reaction_depth",
            message,
        )
        .await;
        return;
    }
    let args = json!({ "event": event_json(event), "behavior": behavior.name });
    run_behavior(engine, org, keys, behavior, origin, args).await;
}

/// Runs `behavior`'s script with the authority of the least privileged principal who shaped it
/// (as they are now), with `args` as `ctx.args`, at the depth `origin` gives: a reaction's, or
/// a scheduled run's. Its outcome is its Action; one whose shapers can no longer lend it
/// authority is an `error` Action.
pub(super) async fn run_behavior(
    engine: &Engine,
    org: &OrgId,
    keys: &OrgKeys,
    behavior: &Behavior,
    origin: Origin,
    args: Value,
) {
    let caller =
        match lore_directory::caller::least_of(&engine.ports, org, &behavior.shapers()).await {
            Ok(c) => c,
            Err(e) => {
                let message = format!("behavior {} cannot run: {e}", behavior.name);
                record_skipped(engine, keys, behavior, origin, "error", e.code(), message).await;
                return;
            }
        };
    let mut inner = engine.script_copy(engine.ports.clone(), false);
    inner.reaction_depth = origin.depth.unwrap_or(1);
    let spec = Spec {
        source: "behavior",
        tier: Tier::Admin,
        code: &behavior.code,
        args: Some(args),
        dry_run: false,
        caps: engine.config.scripts.clone(),
        origin,
        progress: None,
        modes: None,
    };
    if let Err(e) = run_script(&inner, &caller, spec).await {
        tracing::info!(behavior = %behavior.name, %org, error = %e, "a behavior's run failed");
    }
}

/// An Action for a reaction (or a scheduled run) that did not run.
pub(super) async fn record_skipped(
    engine: &Engine,
    keys: &OrgKeys,
    behavior: &Behavior,
    origin: Origin,
    status: &str,
    code: &str,
    message: String,
) {
    let ulid = lore_base::ids::new_ulid(&engine.ports);
    let action = Action {
        id: format!("act_{ulid}"),
        principal: behavior.owner.clone(),
        source: "behavior".into(),
        mode: "try".into(),
        dry_run: false,
        status: status.into(),
        code_hash: Some(lore_base::keys::sha256_hex(&behavior.code)),
        steps: Vec::new(),
        error: Some(json!({ "code": code, "message": message })),
        behavior: origin.behavior,
        trigger_event: origin.trigger_event,
        depth: origin.depth,
        operation: None,
        sends: Vec::new(),
        caps_used: Vec::new(),
        created_at: lore_records::now_text(&engine.ports),
    };
    if let Err(e) = engine
        .ports
        .storage
        .put(&keys.action(&ulid), lore_records::to_bytes(&action))
        .await
    {
        tracing::warn!(error = %e, "could not record a reaction's action");
    }
}
