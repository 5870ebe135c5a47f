//! The TypeScript strip + run path: any input is a script run by an org's owner with small
//! caps. It must end in a result or a structured error; a panic, an abort or a stack overflow
//! is a finding. The script runs on a thread with the native server's script stack.
#![no_main]

use std::rc::Rc;

use futures_executor::block_on;
use libfuzzer_sys::fuzz_target;
use lore_base::ids::OrgId;
use lore_base::ports::Ports;
use lore_base::storage::memory::MemoryStorage;
use lore_directory::caller::resolve_caller;
use lore_directory::tokens::verify_token;
use lore_engine::scripts::{Surface, run_with_caps};
use lore_front::{Config, Lore};
use lore_meter::Metered;
use lore_sandbox::caps::ScriptCaps;
use lore_testing::ports::{SeqRandom, StepClock};

#[global_allocator]
static ALLOCATOR: Metered<std::alloc::System> = Metered(std::alloc::System);

fn caps() -> ScriptCaps {
    ScriptCaps {
        steps: 200_000,
        jobs: 2_000,
        sdk_calls: 20,
        wall_ms: 2_000,
        sleep_ms: 50,
        memory_bytes: 32 << 20,
        ..ScriptCaps::default()
    }
}

fn run(code: String) {
    let ports = Ports {
        storage: Rc::new(MemoryStorage::new()),
        clock: Rc::new(StepClock::starting_at(1_767_225_600_000)),
        random: Rc::new(SeqRandom::seeded(7)),
        http: None,
        embedder: None,
        cache: None,
        background: None,
    };
    let lore = Lore::new(ports, Config::default());
    block_on(async {
        let token = match lore_directory::admin::init(lore.ports(), "fuzz")
            .await
            .unwrap()
        {
            lore_directory::admin::InitOutcome::Created(t) => t.token,
            _ => unreachable!("a fresh store"),
        };
        let credential = verify_token(lore.ports(), &token, None).await.unwrap();
        let org = OrgId::parse("fuzz").unwrap();
        let caller = resolve_caller(lore.ports(), credential, None, &org)
            .await
            .unwrap();
        // Ok or a structured error: both are fine; only a crash is a finding.
        let _ = run_with_caps(
            &lore.engine,
            &caller,
            Surface::Run,
            &code,
            None,
            false,
            caps(),
        )
        .await;
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(code) = std::str::from_utf8(data) else {
        return;
    };
    let code = code.to_string();
    std::thread::Builder::new()
        .stack_size(lore_sandbox::failure::STACK_BYTES)
        .spawn(move || run(code))
        .unwrap()
        .join()
        .unwrap();
});
