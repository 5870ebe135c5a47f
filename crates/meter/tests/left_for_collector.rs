//! What ended runs leave for the collector is kept until the runner says it collected.

#[global_allocator]
static ALLOCATOR: lore_meter::Metered<std::alloc::System> = lore_meter::Metered(std::alloc::System);

use lore_meter::{Run, Section, collected, left_for_collector, live};

#[test]
fn what_ended_runs_still_held_adds_up_until_collected() {
    assert!(lore_meter::installed());
    let mut kept = Vec::new();
    for round in 1..=3 {
        let run = Run::begin();
        let section = Section::enter();
        // Held past the run's end, as a realm's objects are until a collection.
        kept.push(vec![0u8; 1 << 20]);
        drop(section);
        assert!(live() >= 1 << 20);
        drop(run);
        assert_eq!(live(), 0, "the count restarts when no run is going on");
        assert!(left_for_collector() >= round << 20, "round {round}");
    }
    collected();
    assert_eq!(left_for_collector(), 0);
    drop(kept);
}

#[test]
fn what_is_made_before_a_run_is_counted_for_the_run_that_takes_it() {
    assert!(lore_meter::installed());
    let (made, bytes) = lore_meter::measured(|| vec![7u8; 1 << 20]);
    assert!(bytes >= 1 << 20, "measured {bytes}");
    assert_eq!(live(), 0, "nothing is counted before a run takes it");
    let run = Run::begin();
    lore_meter::charge(bytes);
    assert!(live() >= 1 << 20);
    let section = Section::enter();
    drop(made);
    drop(section);
    assert!(
        live() < 4096,
        "freeing it inside the run takes it off again: {}",
        live()
    );
    drop(run);
}
