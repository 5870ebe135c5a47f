//! Running an operation (`operations.run`, and a Noun's verb bound to one) whose access the
//! dispatcher has already checked: an HTTP operation calls its connection; a script operation
//! runs through the engine's script runner, calling methods up to `allowed` and the
//! operation's own access tier (a `read` operation's body only reads), with the least role of
//! its caller and the principals who shaped it: code an admin wrote never runs with an
//! owner's rights because the owner called it.

use serde_json::{Map, Value};

use lore_directory::Caller;

use crate::instance::Engine;
use lore_base::error::{LoreError, Result};
use lore_base::model::Tier;
use lore_records::operations::{self, Operation, OperationBody};

pub async fn run(
    engine: &Engine,
    caller: &Caller,
    op: &Operation,
    args: Map<String, Value>,
    allowed: Tier,
) -> Result<Value> {
    operations::check_args(op, &Value::Object(args.clone()))?;
    let (_, least) =
        lore_directory::caller::least_shaper(&engine.ports, caller.org(), &op.shapers())
            .await
            .map_err(|e| LoreError::Forbidden(format!("operation {} cannot run: {e}", op.name)))?;
    let caller = &caller.narrowed(least);
    match &op.body {
        OperationBody::Script { code } => {
            let tier = allowed.min(op.access);
            engine
                .scripts
                .run_operation(engine, caller, op, code, Value::Object(args), tier)
                .await
        }
        OperationBody::Http {
            connection,
            method,
            path,
        } => operations::call_http(&engine.ports, caller, connection, method, path, &args).await,
    }
}
