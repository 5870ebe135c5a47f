//! Behaviors' schedule triggers, in-process on the in-memory store: a schedule runs when it is
//! due and not before, once per due time however often hosts pass, without making up runs
//! missed while nothing passed; disabling or deleting it stops it and takes the org out of the
//! index of orgs with schedules; a pass over every org runs each org's own as its owner; a
//! host that wakes orgs (Workers) is asked to, at the right time, instead of the pass running
//! them; schedules saved before schedules ran are adopted.

use crate::common;

use std::rc::Rc;

use futures_executor::block_on;
use serde_json::{Value, json};

use common::{Harness, jumping_ports, ok};
use lore_base::ids::OrgId;
use lore_directory::admin;
use lore_testing::ports::Wakes;

const MINUTE: i64 = 60_000;

fn harness_with(background: Option<Rc<dyn lore_base::ports::Background>>) -> Harness {
    let h = Harness::on(jumping_ports(5, background), "acme");
    h.run_ok(
        &h.owner,
        "await client.templates.create({name: 'tick', schema: {type: 'object', properties: {due: {type: 'string'}}}}); return 'ok';",
    );
    h
}

fn harness() -> Harness {
    harness_with(None)
}

fn now(h: &Harness) -> i64 {
    h.lore.ports().clock.now_ms()
}

/// A behavior named `name` that records each run as a `tick` entity named after its due time.
fn every_minute(h: &Harness, token: &str, name: &str) -> Value {
    ok(&h.call(
        token,
        "run_sdk",
        json!({"code": "return await client.behaviors.create(ctx.args)",
               "args": {"name": name, "trigger": {"schedule": "every 1m"},
                        "code": "await client.entities.create({type: 'tick', name: ctx.args.behavior + ' ' + ctx.args.schedule.due_at, properties: {due: ctx.args.schedule.due_at}}); return ctx.args.schedule.seconds"}}),
    ))
}

fn ticks(h: &Harness, token: &str) -> Vec<String> {
    let r = h.run_ok(
        token,
        "return (await client.entities.list({type: 'tick'})).items.map((t: any) => t.name).sort()",
    );
    serde_json::from_value(r).unwrap()
}

fn behavior_actions(h: &Harness, token: &str) -> Vec<Value> {
    let r = h.run_ok(
        token,
        "return (await client.actions.list({limit: 500})).items.filter((a: any) => a.source === 'behavior')",
    );
    r.as_array().unwrap().clone()
}

fn acme() -> OrgId {
    OrgId::parse("acme").unwrap()
}

fn pass(h: &Harness, org: &OrgId, at: i64) -> (u32, Option<i64>) {
    let p = block_on(h.lore.run_schedules(org, at)).unwrap();
    (p.fired, p.next_at_ms)
}

fn stored(h: &Harness, key: &str) -> Option<Vec<u8>> {
    block_on(h.lore.ports().storage.get(key)).unwrap()
}

#[test]
fn a_schedule_runs_when_due_once_per_due_time_and_never_early() {
    let h = harness();
    let created = now(&h);
    every_minute(&h, &h.owner, "heartbeat");
    let (fired, next) = pass(&h, &acme(), created + 1_000);
    assert_eq!(fired, 0, "not before it is due");
    let due = next.expect("the org has a schedule");
    assert!(
        (created + MINUTE..created + MINUTE + 1_000).contains(&due),
        "the first run is one interval after it was set: {due} vs {created}"
    );
    assert_eq!(pass(&h, &acme(), due), (1, Some(due + MINUTE)));
    assert_eq!(
        pass(&h, &acme(), due + 5_000),
        (0, Some(due + MINUTE)),
        "a due time fires once, however often hosts pass"
    );
    assert_eq!(pass(&h, &acme(), due + MINUTE), (1, Some(due + 2 * MINUTE)));
    let ticks = ticks(&h, &h.owner);
    assert_eq!(ticks.len(), 2, "{ticks:?}");
    let due_at = lore_base::time::format_time(due);
    assert!(ticks.contains(&format!("heartbeat {due_at}")), "{ticks:?}");
    let acts = behavior_actions(&h, &h.owner);
    assert_eq!(acts.len(), 2, "{acts:?}");
    for a in &acts {
        assert_eq!(a["status"], "ok", "{a}");
        assert_eq!(a["behavior"], "heartbeat");
        assert!(a["trigger_event"].is_null(), "{a}");
    }
}

#[test]
fn runs_missed_while_nothing_passed_are_not_made_up() {
    let h = harness();
    every_minute(&h, &h.owner, "heartbeat");
    let due = pass(&h, &acme(), now(&h)).1.unwrap();
    let late = due + 90 * MINUTE + 30_000;
    assert_eq!(pass(&h, &acme(), late), (1, Some(due + 91 * MINUTE)));
    assert_eq!(ticks(&h, &h.owner).len(), 1);
}

#[test]
fn disabling_or_deleting_a_schedule_stops_it_and_the_org_leaves_the_index() {
    let h = harness();
    every_minute(&h, &h.owner, "heartbeat");
    assert!(stored(&h, "sched/acme").is_some(), "the org is indexed");
    assert!(stored(&h, "o/acme/sched/heartbeat").is_some());
    let update = |args: Value| {
        ok(&h.call(
            &h.owner,
            "run_sdk",
            json!({"code": "return await client.behaviors.update(ctx.args)", "args": args}),
        ))
    };
    update(json!({"name": "heartbeat", "enabled": false}));
    assert!(stored(&h, "o/acme/sched/heartbeat").is_none());
    let report = block_on(h.lore.schedule_pass(now(&h) + 10 * MINUTE, false));
    assert_eq!(report["fired"], 0, "{report}");
    assert!(
        stored(&h, "sched/acme").is_none(),
        "an org with no schedule left leaves the index"
    );
    let before = now(&h);
    update(json!({"name": "heartbeat", "enabled": true}));
    assert!(stored(&h, "sched/acme").is_some(), "back in the index");
    let due = pass(&h, &acme(), before).1.unwrap();
    assert!(
        due > before + MINUTE - 1_000,
        "starts over: {due} vs {before}"
    );
    // A changed schedule starts over too; the same one is left as it is.
    update(json!({"name": "heartbeat", "description": "still every minute"}));
    assert_eq!(pass(&h, &acme(), before).1, Some(due));
    update(json!({"name": "heartbeat", "trigger": {"schedule": "every 2h"}}));
    assert!(pass(&h, &acme(), before).1.unwrap() > before + 119 * MINUTE);
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.behaviors.delete({name: 'heartbeat'})"}),
    ));
    assert!(stored(&h, "o/acme/sched/heartbeat").is_none());
    assert_eq!(pass(&h, &acme(), before + 300 * MINUTE), (0, None));
    assert!(ticks(&h, &h.owner).is_empty());
}

#[test]
fn a_pass_runs_every_orgs_own_schedules_as_their_owners() {
    let h = harness();
    let beta = block_on(admin::create_org(h.lore.ports(), "beta"))
        .unwrap()
        .token;
    h.run_ok(
        &beta,
        "await client.templates.create({name: 'tick', schema: {type: 'object', properties: {due: {type: 'string'}}}}); return 1",
    );
    every_minute(&h, &h.owner, "acme-beat");
    every_minute(&h, &beta, "beta-beat");
    // A failing schedule in one org does not stop the pass.
    ok(&h.call(
        &h.owner,
        "run_sdk",
        json!({"code": "return await client.behaviors.create(ctx.args)",
               "args": {"name": "broken", "trigger": {"schedule": "every 1m"},
                        "code": "throw new Error('always fails')"}}),
    ));
    let report = block_on(h.lore.schedule_pass(now(&h) + 2 * MINUTE, false));
    assert_eq!(report["orgs"], 2, "{report}");
    assert_eq!(report["fired"], 3, "{report}");
    assert_eq!(report["errors"], json!([]), "{report}");
    let acme_ticks = ticks(&h, &h.owner);
    let beta_ticks = ticks(&h, &beta);
    assert_eq!(acme_ticks.len(), 1, "{acme_ticks:?}");
    assert!(acme_ticks[0].starts_with("acme-beat "), "{acme_ticks:?}");
    assert_eq!(beta_ticks.len(), 1, "{beta_ticks:?}");
    assert!(beta_ticks[0].starts_with("beta-beat "), "{beta_ticks:?}");
    let acts = behavior_actions(&h, &h.owner);
    let broken: Vec<&Value> = acts.iter().filter(|a| a["behavior"] == "broken").collect();
    assert_eq!(broken.len(), 1, "{acts:?}");
    assert_eq!(broken[0]["status"], "error", "{acts:?}");
    assert!(
        behavior_actions(&h, &beta)
            .iter()
            .all(|a| a["behavior"] == "beta-beat"),
        "another org's runs are not in this org's actions"
    );
}

#[test]
fn a_host_that_wakes_orgs_is_asked_to_at_the_due_time() {
    let wakes = Rc::new(Wakes {
        wakes_orgs: true,
        ..Wakes::default()
    });
    let h = harness_with(Some(wakes.clone()));
    let before = now(&h);
    every_minute(&h, &h.owner, "heartbeat");
    let asked = wakes.wakes.borrow().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, "acme");
    assert!((before + MINUTE..before + MINUTE + 1_000).contains(&asked[0].1));
    // The pass wakes the org rather than running its schedules here.
    let report = block_on(h.lore.schedule_pass(before + 5 * MINUTE, false));
    assert_eq!(
        (report["fired"].clone(), report["woken"].clone()),
        (json!(0), json!(1)),
        "{report}"
    );
    assert_eq!(wakes.wakes.borrow().len(), 2);
    assert!(ticks(&h, &h.owner).is_empty());
}

#[test]
fn schedules_saved_before_schedules_ran_are_adopted() {
    let h = harness();
    every_minute(&h, &h.owner, "heartbeat");
    // As a database from before: the behavior, without its next run or the index entry.
    let mut batch = lore_base::storage::Batch::new();
    batch.delete("o/acme/sched/heartbeat").delete("sched/acme");
    block_on(h.lore.ports().storage.commit(batch)).unwrap();
    let later = now(&h) + 10 * MINUTE;
    let report = block_on(h.lore.schedule_pass(later, false));
    assert_eq!(report["orgs"], 0, "not indexed: {report}");
    let report = block_on(h.lore.schedule_pass(later, true));
    assert_eq!(report["orgs"], 1, "{report}");
    assert_eq!(report["fired"], 0, "adopted from now on, not run at once");
    assert!(stored(&h, "o/acme/sched/heartbeat").is_some());
    let report = block_on(h.lore.schedule_pass(later + 2 * MINUTE, false));
    assert_eq!(report["fired"], 1, "{report}");
}
