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
