//! The SDK: one method registry that is the single source of truth for dispatch, access
//! checks, `search_sdk`, the TypeScript declarations (`/$.d.ts`), the argument JSON Schemas and
//! the REST admin routes.
//!
//! - [`methods`] holds the static entries (namespaces `entities`, `relationships`, `memory`,
//!   `templates`, `feeds`, `connections`, `operations`, `behaviors`, `actions`, `metrics`,
//!   `sql`, `agents`, `members`, `tokens`, `grants`, `organizations`);
//! - [`nouns`] adds one typed namespace per entity type of the caller's org, with the built-in
//!   verbs and the operations bound to it;
//! - [`call`] is the one dispatcher: it checks the caller's tier, token scopes and role before
//!   anything runs, validates the arguments, then runs the method.
//!
//! Architecture invariant: every SDK call is checked for org, role, scope and tier here, in
//! Rust, before it runs.

pub mod invoke;
pub mod methods;
pub mod names;
pub mod nouns;
pub mod results;
pub mod search_sdk;
pub mod spec;
pub mod tstype;
pub mod typescript;

use std::sync::OnceLock;

use serde_json::Value;

use crate::instance::Engine;
use lore_base::error::{LoreError, Result};
use lore_base::model::{Mode, Tier};
use lore_directory::Caller;
use spec::{Cx, Json, MethodSpec, authorize, parse_args};

pub use spec::may_call;

/// The static method at `path`, with its index in [`methods::METHODS`].
pub fn find(path: &str) -> Option<(usize, &'static MethodSpec)> {
    methods::METHODS
        .iter()
        .enumerate()
        .find(|(_, m)| m.is(path))
}

/// Compiled argument validators of the static methods, built once per process.
fn validator(index: usize) -> &'static jsonschema::Validator {
    static VALIDATORS: OnceLock<Vec<jsonschema::Validator>> = OnceLock::new();
    &VALIDATORS.get_or_init(|| {
        methods::METHODS
            .iter()
            .map(|m| {
                lore_base::schema::compile(&(m.args)())
                    .unwrap_or_else(|e| panic!("schema of {} does not compile: {e}", m.path()))
            })
            .collect()
    })[index]
}

/// Dispatches one SDK call: resolve the method, check access, validate, run.
pub async fn call(
    engine: &Engine,
    caller: &Caller,
    path: &str,
    args: Value,
    allowed: Tier,
) -> Result<Json> {
    let args = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args
    };
    let cx = Cx {
        engine,
        caller,
        allowed,
    };
    if let Some((index, spec)) = find(path) {
        authorize(engine, caller, spec.tier, allowed, path)?;
        lore_base::schema::check(validator(index), &args, "")?;
        return (spec.run)(&cx, args).await;
    }
    if path
        .split('.')
        .next()
        .is_some_and(|ns| ns.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        return nouns::call(&cx, path, args).await;
    }
    Err(unknown_method(path))
}

/// Whether `path` names a static read method (scripts keep the shared memory index for those).
pub fn is_read(path: &str) -> bool {
    find(path).is_some_and(|(_, spec)| spec.tier == Tier::Read && !spec.is("operations.run"))
}

/// Resolves, authorizes and validates a call without running it (dry runs): returns the tier
/// the call needs. `operations.run` and Noun verbs bound to operations need the operation's.
pub async fn check_call(
    engine: &Engine,
    caller: &Caller,
    path: &str,
    args: &Value,
    allowed: Tier,
) -> Result<Tier> {
    let empty = Value::Object(Default::default());
    let args = if args.is_null() { &empty } else { args };
    let cx = Cx {
        engine,
        caller,
        allowed,
    };
    if let Some((index, spec)) = find(path) {
        authorize(engine, caller, spec.tier, allowed, path)?;
        lore_base::schema::check(validator(index), args, "")?;
        if spec.is("operations.run") {
            let a: lore_records::operations::RunOperation = parse_args(args.clone())?;
            let op = lore_records::operations::get(&engine.ports, caller, &a.name).await?;
            authorize(engine, caller, op.access, allowed, path)?;
            lore_records::operations::check_args(&op, &Value::Object(a.args))?;
            return Ok(op.access);
        }
        return Ok(spec.tier);
    }
    if path
        .split('.')
        .next()
        .is_some_and(|ns| ns.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        let (_, methods) = nouns::catalog(&cx).await?;
        let method = methods
            .iter()
            .find(|m| m.path() == path)
            .ok_or_else(|| unknown_method(path))?;
        authorize(engine, caller, method.tier, allowed, path)?;
        nouns::check_args(&cx, path, args).await?;
        return Ok(method.tier);
    }
    Err(unknown_method(path))
}

/// What dispatching a call means for modes (SPEC 4.5): the tier it needs, the mode it takes
/// when the program does not choose, and whether it reaches outside lore (an HTTP call
/// through a connection), where no rollback undoes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub tier: Tier,
    pub mode: Mode,
    pub external: bool,
}

/// Resolves a call for [`Resolved`] without running or authorizing it.
pub async fn resolve(
    engine: &Engine,
    caller: &Caller,
    path: &str,
    args: &Value,
) -> Result<Resolved> {
    if let Some((_, spec)) = find(path) {
        if spec.is("operations.run") {
            let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
            let op = lore_records::operations::get(&engine.ports, caller, name).await?;
            return Ok(Resolved {
                tier: op.access,
                mode: op.mode,
                external: matches!(
                    op.body,
                    lore_records::operations::OperationBody::Http { .. }
                ),
            });
        }
        return Ok(Resolved {
            tier: spec.tier,
            mode: spec.mode,
            external: spec.is("connections.call"),
        });
    }
    let cx = Cx {
        engine,
        caller,
        allowed: Tier::Admin,
    };
    let (_, methods) = nouns::catalog(&cx).await?;
    let method = methods
        .iter()
        .find(|m| m.path() == path)
        .ok_or_else(|| unknown_method(path))?;
    Ok(Resolved {
        tier: method.tier,
        mode: method.mode,
        external: method.external,
    })
}

fn unknown_method(path: &str) -> LoreError {
    let namespace = path.split('.').next().unwrap_or_default();
    let same_ns: Vec<String> = methods::METHODS
        .iter()
        .filter(|m| m.namespace == namespace)
        .map(MethodSpec::path)
        .collect();
    let hint = if same_ns.is_empty() {
        let mut namespaces: Vec<&str> = methods::METHODS.iter().map(|m| m.namespace).collect();
        namespaces.dedup();
        format!("namespaces: {}", namespaces.join(", "))
    } else {
        format!("{namespace} has {}", same_ns.join(", "))
    };
    LoreError::not_found(format!(
        "SDK method {path:?} ({hint}; find methods with search_sdk)"
    ))
}
