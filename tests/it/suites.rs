//! The shared storage and records suites (`lore-testing`) on the in-process backends: the
//! in-memory store, native SQLite, and the fault-injecting wrapper with nothing armed. The edge
//! backends (D1, Spin SQLite) run the same cases through their test builds' suite routes.

mod memory {
    lore_testing::storage_suite!(lore_base::storage::memory::MemoryStorage::new());
    lore_testing::records_suite!(std::rc::Rc::new(
        lore_base::storage::memory::MemoryStorage::new()
    ));
}

mod sqlite {
    lore_testing::storage_suite!(lore::sqlite::SqliteStorage::open_in_memory().unwrap());
    lore_testing::records_suite!(std::rc::Rc::new(
        lore::sqlite::SqliteStorage::open_in_memory().unwrap()
    ));
}

/// The directory in one store and each org in its own, as on Cloudflare (D1 and an org's
/// Durable Object): the records suite's orgs each land in a store of their own.
mod split {
    lore_testing::storage_suite!(lore_testing::ports::split_memory());
    lore_testing::records_suite!(std::rc::Rc::new(lore_testing::ports::split_memory()));
}

mod faulty {
    lore_testing::storage_suite!(lore_testing::faulty::FaultyStorage::new(std::rc::Rc::new(
        lore_base::storage::memory::MemoryStorage::new()
    )));
}
