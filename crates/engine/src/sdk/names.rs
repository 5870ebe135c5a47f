//! The names the SDK's TypeScript declarations use for themselves: the record types results
//! refer to ([`RECORD_TYPES`]) and the global types of TypeScript and JavaScript; an entity
//! type may not take one as its Noun ([`is_reserved`]).

use serde_json::Value;

use super::results::{MemoryHit, MemoryPage, MemoryResults, MemoryVersions, SavedIds, SdkMethod};
use lore_base::schema::schema_of;
use lore_directory::admin::{IssuedToken, TokenSummary};
use lore_directory::invites::{Invite, InviteOutcome};
use lore_records::Done;
use lore_records::actions::Action;
use lore_records::behaviors::Behavior;
use lore_records::connections::{CallResult, Connection};
use lore_records::entities::Entity;
use lore_records::feeds::{Feed, FeedCreated, FeedItems, FeedWithSecret, PullResult};
use lore_records::metrics::{Metric, MetricInfo, MetricValue};
use lore_records::operations::Operation;
use lore_records::people::{GrantInfo, Member, OrgInfo};
use lore_records::relationships::Relationship;
use lore_records::types::EntityType;

/// A declared record type: its TypeScript name and its JSON Schema.
pub type RecordType = (&'static str, fn() -> Value);

/// The record types results refer to, declared once at the top of every `.d.ts`.
pub static RECORD_TYPES: &[RecordType] = &[
    ("Entity", schema_of::<Entity>),
    ("Relationship", schema_of::<Relationship>),
    ("EntityType", schema_of::<EntityType>),
    ("MemoryHit", schema_of::<MemoryHit>),
    ("MemoryResults", schema_of::<MemoryResults>),
    ("MemoryPage", schema_of::<MemoryPage>),
    ("MemoryVersions", schema_of::<MemoryVersions>),
    ("SavedIds", schema_of::<SavedIds>),
    ("Feed", schema_of::<Feed>),
    ("FeedWithSecret", schema_of::<FeedWithSecret>),
    ("FeedCreated", schema_of::<FeedCreated>),
    ("FeedItems", schema_of::<FeedItems>),
    ("PullResult", schema_of::<PullResult>),
    ("Connection", schema_of::<Connection>),
    ("CallResult", schema_of::<CallResult>),
    ("Operation", schema_of::<Operation>),
    ("Behavior", schema_of::<Behavior>),
    ("Action", schema_of::<Action>),
    ("Metric", schema_of::<Metric>),
    ("MetricInfo", schema_of::<MetricInfo>),
    ("MetricValue", schema_of::<MetricValue>),
    ("Member", schema_of::<Member>),
    ("IssuedToken", schema_of::<IssuedToken>),
    ("TokenSummary", schema_of::<TokenSummary>),
    ("GrantInfo", schema_of::<GrantInfo>),
    ("OrgInfo", schema_of::<OrgInfo>),
    ("Invite", schema_of::<Invite>),
    ("InviteOutcome", schema_of::<InviteOutcome>),
    ("Done", schema_of::<Done>),
    ("SdkMethod", schema_of::<SdkMethod>),
    ("SqlResult", schema_of::<lore_records::sql::SqlResult>),
];

/// Names a Noun may not take: the declared record types, the `.d.ts`'s own names, and the
/// global types of TypeScript and JavaScript.
const RESERVED: &[&str] = &[
    "Page",
    "LoreSdk",
    "LoreCtx",
    "Array",
    "ArrayBuffer",
    "BigInt",
    "Boolean",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "Function",
    "Infinity",
    "Intl",
    "JSON",
    "Map",
    "Math",
    "NaN",
    "Number",
    "Object",
    "Partial",
    "Pick",
    "Omit",
    "Promise",
    "Proxy",
    "RangeError",
    "Readonly",
    "Record",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Required",
    "Exclude",
    "Extract",
    "Set",
    "String",
    "Symbol",
    "SyntaxError",
    "TypeError",
    "URIError",
    "WeakMap",
    "WeakSet",
    "Awaited",
    "ReturnType",
    "Parameters",
    "NonNullable",
    "Uppercase",
    "Lowercase",
    "Capitalize",
    "Uncapitalize",
    "Iterable",
    "Iterator",
    "Generator",
    "Uint8Array",
];

/// Whether a Noun name would clash with a name the declarations already use.
pub fn is_reserved(noun: &str) -> bool {
    RESERVED.contains(&noun) || RECORD_TYPES.iter().any(|(n, _)| *n == noun)
}
