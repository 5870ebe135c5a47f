//! Running an operation (`operations.run`, and a Noun's verb bound to one) whose access the
//! dispatcher has already checked: an HTTP operation calls its connection; a script operation
//! runs through the engine's script runner with the caller's permissions, calling methods up
//! to `allowed` and the operation's own access tier (a `read` operation's body only reads).

use serde_json::{Map, Value};

use lore_directory::Caller;

use crate::instance::Engine;
use crate::records::operations::{self, Operation, OperationBody};
use lore_base::error::Result;
use lore_base::model::Tier;

pub async fn run(
    engine: &Engine,
    caller: &Caller,
    op: &Operation,
    args: Map<String, Value>,
    allowed: Tier,
) -> Result<Value> {
    operations::check_args(op, &Value::Object(args.clone()))?;
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
