//! `query_sql` and `sql.query` in-process on the in-memory store: joins, aggregates, `WITH`,
//! `ORDER BY`, pagination, typed tables, budgets, the 1 MB cut, refused writes, errors that
//! name the problem, a virtual feed served by a local HTTP server, SQL metrics, and a
//! cross-org probe suite that must never return another org's row.

use crate::common;

/// The query's memory budget counts through the allocator, as in `lore serve`.
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_executor::block_on;
use serde_json::{Value, json};

use lore_base::model::Role;
use lore_base::ports::Ports;
use lore_directory::admin;
use lore_front::{Config, Lore};

const V26: &str = "2026-07-28";

struct Harness {
    lore: Lore,
    owner: String,
    rival: String,
}

struct Reply {
    status: u16,
    body: Value,
}

impl Harness {
    fn new() -> Self {
        Self::with(Config {
            outbound: common::loopback_upstreams(),
            ..Config::default()
        })
    }

    fn with(config: Config) -> Self {
        let ports = Ports {
            http: Some(Rc::new(common::loopback_client())),
            ..common::memory_ports(5)
        };
        let common::Harness { lore, owner } = common::Harness::on_with(ports, "acme", config);
        let rival = block_on(admin::create_org(lore.ports(), "rival"))
            .unwrap()
            .token;
        Self { lore, owner, rival }
    }

    fn token(&self, role: Role, scopes: &str) -> String {
        common::token(&self.lore, "acme", role, scopes)
    }

    fn api_in(&self, org: &str, token: &str, name: &str, args: Value) -> Reply {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("/api/{org}/{name}"))
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&args).unwrap())
            .unwrap();
        let response = block_on(self.lore.handle(req));
        let status = response.status().as_u16();
        let text = String::from_utf8(response.into_body()).unwrap();
        Reply {
            status,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    fn ok_in(&self, org: &str, token: &str, name: &str, args: Value) -> Value {
        let r = self.api_in(org, token, name, args);
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        r.body
    }

    fn ok(&self, name: &str, args: Value) -> Value {
        self.ok_in("acme", &self.owner, name, args)
    }

    /// `sql.query` as the acme owner.
    fn sql(&self, args: Value) -> Value {
        self.ok("sql.query", args)
    }

    /// A failing `sql.query`: its error message.
    fn sql_error(&self, args: Value) -> String {
        let r = self.api_in("acme", &self.owner, "sql.query", args.clone());
        assert_eq!(r.status, 400, "{args}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_argument", "{}", r.body);
        r.body["error"]["message"].as_str().unwrap().to_string()
    }

    /// `query_sql` over MCP (2026-07-28, stateless); the tool result.
    fn tool(&self, token: &str, args: Value) -> Value {
        self.tool_named(token, "query_sql", args)
    }

    /// A tool over MCP; the tool result.
    fn tool_named(&self, token: &str, name: &str, args: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": args, "_meta": {
            "io.modelcontextprotocol/protocolVersion": V26,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}});
        let request = http::Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", "127.0.0.1:8787")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", V26)
            .header("mcp-method", "tools/call")
            .header("mcp-name", name)
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let response = block_on(self.lore.handle(request));
        assert_eq!(response.status(), 200);
        let text = String::from_utf8(response.into_body()).unwrap();
        let json = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .map(str::to_string)
            .unwrap_or(text);
        serde_json::from_str::<Value>(&json).unwrap()["result"].clone()
    }

    /// Every stored key and value under the orgs, for "nothing was written" checks (usage
    /// counters excluded: counting a call is not writing data).
    fn dump(&self) -> Vec<(String, Vec<u8>)> {
        block_on(self.lore.ports().storage.scan_all("o/"))
            .unwrap()
            .into_iter()
            .filter(|(k, _)| !k.contains("/usage/"))
            .collect()
    }

    /// Tickets, people and links in acme; look-alike records in rival.
    fn seed(&self) {
        self.ok(
            "templates.create",
            json!({"name": "ticket", "schema": {"type": "object", "properties": {
                "title": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "high"]},
                "points": {"type": "integer"},
                "done": {"type": "boolean"},
                "labels": {"type": "array", "items": {"type": "string"}},
                "version": {"type": "string"}
            }}}),
        );
        self.ok("templates.create", json!({"name": "person"}));
        let tickets = [
            ("Login fails", "high", 5, false, json!(["auth"])),
            ("Slow search", "low", 3, false, json!(["perf", "search"])),
            ("Typo on home", "low", 1, true, json!([])),
            ("Data loss on save", "high", 8, false, json!(["storage"])),
        ];
        let mut ids = Vec::new();
        for (title, priority, points, done, labels) in tickets {
            let e = self.ok(
                "entities.create",
                json!({"type": "ticket", "name": title, "properties": {
                    "title": title, "priority": priority, "points": points, "done": done,
                    "labels": labels, "version": "v1"}}),
            );
            ids.push(e["id"].as_str().unwrap().to_string());
        }
        let ada = self.ok(
            "entities.create",
            json!({"type": "person", "name": "Ada", "properties": {"team": "core"}}),
        );
        let bob = self.ok(
            "entities.create",
            json!({"type": "person", "name": "Bob", "properties": {"team": "web"}}),
        );
        for (ticket, person) in [(0, &ada), (1, &bob), (3, &ada)] {
            self.ok(
                "relationships.create",
                json!({"type": "assigned_to", "from": ids[ticket], "to": person["id"]}),
            );
        }
        self.ok(
            "memory.save",
            json!({"content": "Ada owns the auth service", "kind": "fact", "entity_ids": [ada["id"]]}),
        );
        let old = self.ok(
            "memory.save",
            json!({"content": "Deploys happen on Tuesdays", "kind": "decision"}),
        );
        self.ok(
            "memory.save",
            json!({"content": "Deploys happen on Thursdays", "kind": "decision",
                "supersedes_event_id": old["ids"][0]}),
        );
        // The other org: the same shapes, every text marked RIVAL.
        self.ok_in(
            "rival",
            &self.rival,
            "templates.create",
            json!({"name": "ticket", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}),
        );
        for i in 0..3 {
            let e = self.ok_in(
                "rival",
                &self.rival,
                "entities.create",
                json!({"type": "ticket", "name": format!("RIVAL ticket {i}"), "properties": {"title": "RIVAL secret"}}),
            );
            self.ok_in(
                "rival",
                &self.rival,
                "relationships.create",
                json!({"type": "rival_link", "from": e["id"], "to": e["id"]}),
            );
        }
        self.ok_in(
            "rival",
            &self.rival,
            "memory.save",
            json!({"content": "RIVAL secret plan", "kind": "fact"}),
        );
    }
}

fn rows(result: &Value) -> Vec<Value> {
    result["rows"].as_array().unwrap().clone()
}

#[test]
fn joins_aggregates_with_and_order_by() {
    let h = Harness::new();
    h.seed();
    let r = h.sql(
        json!({"sql": "SELECT type, COUNT(*) AS n FROM entities GROUP BY type ORDER BY type"}),
    );
    assert_eq!(r["columns"], json!(["type", "n"]));
    assert_eq!(r["rows"], json!([["person", 2], ["ticket", 4]]));
    assert_eq!(r["row_count"], 2);
    assert_eq!(r["next_cursor"], Value::Null);
    assert_eq!(r["truncated"], false);

    let r = h.sql(json!({"sql":
        "SELECT t.name AS ticket, p.name AS person FROM relationships r \
         JOIN entities t ON t.id = r.from_id JOIN entities p ON p.id = r.to_id \
         WHERE r.type = 'assigned_to' ORDER BY ticket"}));
    assert_eq!(
        r["rows"],
        json!([
            ["Data loss on save", "Ada"],
            ["Login fails", "Ada"],
            ["Slow search", "Bob"]
        ])
    );

    let r = h.sql(json!({"sql":
        "WITH hot AS (SELECT id, title, points FROM ticket WHERE priority = 'high'), \
              assigned AS (SELECT from_id FROM relationships) \
         SELECT COUNT(*) AS n, SUM(points) AS points FROM hot WHERE id IN (SELECT from_id FROM assigned)"}));
    assert_eq!(r["rows"], json!([[2, 13]]));

    let r = h.sql(json!({"sql": "SELECT title, points FROM ticket ORDER BY points DESC LIMIT 3"}));
    assert_eq!(
        r["rows"],
        json!([
            ["Data loss on save", 8],
            ["Login fails", 5],
            ["Slow search", 3]
        ])
    );

    let r = h.sql(json!({"sql":
        "SELECT priority, AVG(points) AS avg, MAX(points) AS top FROM ticket GROUP BY priority \
         HAVING COUNT(*) > 1 ORDER BY 2 DESC"}));
    assert_eq!(r["rows"], json!([["high", 6.5, 8], ["low", 2.0, 3]]));

    // Maps: properties of the generic table; params bind $n.
    let r = h.sql(json!({"sql": "SELECT name FROM entities WHERE properties['team'] = $1", "params": ["web"]}));
    assert_eq!(r["rows"], json!([["Bob"]]));

    // events hides the superseded decision; event_history keeps it, with superseded_by.
    let r = h.sql(json!({"sql": "SELECT content FROM events WHERE kind = 'decision'"}));
    assert_eq!(r["rows"], json!([["Deploys happen on Thursdays"]]));
    let r = h.sql(json!({"sql":
        "SELECT content, superseded_by IS NOT NULL AS replaced FROM event_history \
         WHERE kind = 'decision' ORDER BY content DESC"}));
    assert_eq!(
        r["rows"],
        json!([
            ["Deploys happen on Tuesdays", true],
            ["Deploys happen on Thursdays", false]
        ])
    );

    // A correlated subquery and EXISTS.
    let r = h.sql(json!({"sql":
        "SELECT p.name, (SELECT COUNT(*) FROM relationships r WHERE r.to_id = p.id) AS tickets \
         FROM person p WHERE EXISTS (SELECT 1 FROM relationships r WHERE r.to_id = p.id) ORDER BY tickets DESC"}));
    assert_eq!(r["rows"], json!([["Ada", 2], ["Bob", 1]]));
}

#[test]
fn typed_tables_have_property_columns_and_the_catalog_lists_them() {
    let h = Harness::new();
    h.seed();
    let r = h.sql(
        json!({"sql": "SELECT * FROM ticket WHERE done = FALSE AND points >= 5 ORDER BY points"}),
    );
    assert_eq!(
        r["columns"],
        json!([
            "id",
            "name",
            "done",
            "labels",
            "points",
            "priority",
            "title",
            "prop_version",
            "author",
            "version",
            "created_at",
            "updated_at",
            "properties"
        ])
    );
    let got = rows(&r);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0][1], "Login fails");
    assert_eq!(got[0][3], json!(["auth"]));
    assert_eq!(
        got[0][7], "v1",
        "a property named like a column is prop_{{name}}"
    );
    assert_eq!(got[0][9], 1, "the entity's own version");
    // A type named like a built-in table gets type_{name}; entity_types says which.
    h.ok("templates.create", json!({"name": "events"}));
    h.ok(
        "entities.create",
        json!({"type": "events", "name": "Launch"}),
    );
    let r = h.sql(json!({"sql": "SELECT name, table_name FROM entity_types ORDER BY name"}));
    assert_eq!(
        r["rows"],
        json!([
            ["events", "type_events"],
            ["person", "person"],
            ["ticket", "ticket"]
        ])
    );
    let r = h.sql(json!({"sql": "SELECT name FROM type_events"}));
    assert_eq!(r["rows"], json!([["Launch"]]));
    // The other built-in tables answer.
    for table in ["feeds", "operations", "actions", "metrics", "relationships"] {
        h.sql(json!({"sql": format!("SELECT * FROM {table}")}));
    }
    let r = h.sql(json!({"sql": "SELECT name, kind FROM metrics ORDER BY name"}));
    assert_eq!(
        r["rows"],
        json!([
            ["cap_hits", "builtin"],
            ["tool_calls", "builtin"],
            ["tool_errors", "builtin"]
        ])
    );
}

#[test]
fn pages_cover_every_row_once() {
    let h = Harness::new();
    h.ok("templates.create", json!({"name": "item"}));
    for chunk in 0..5 {
        let items: Vec<Value> = (0..50)
            .map(|i| json!({"name": format!("item {:03}", (chunk * 50 + i) % 97), "properties": {"n": chunk * 50 + i}}))
            .collect();
        h.ok(
            "entities.create_many",
            json!({"type": "item", "items": items}),
        );
    }
    for (order_by, limit) in [
        (None, 40),
        (Some("name desc"), 33),
        (Some("name, id"), 1000),
    ] {
        let mut seen: Vec<String> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut cursor = Value::Null;
        let mut pages = 0;
        loop {
            let mut args = json!({"sql": "SELECT id, name FROM entities", "limit": limit});
            if let Some(o) = order_by {
                args["order_by"] = json!(o);
            }
            if !cursor.is_null() {
                args["cursor"] = cursor.clone();
            }
            let r = h.sql(args);
            pages += 1;
            for row in rows(&r) {
                seen.push(row[0].as_str().unwrap().to_string());
                names.push(row[1].as_str().unwrap().to_string());
            }
            cursor = r["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        assert_eq!(seen.len(), 250, "{order_by:?}");
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 250, "no duplicates with {order_by:?}");
        assert_eq!(pages, 250usize.div_ceil(limit), "{order_by:?}");
        match order_by {
            None => assert!(seen.windows(2).all(|w| w[0] < w[1]), "by id"),
            Some("name desc") => assert!(names.windows(2).all(|w| w[0] >= w[1])),
            _ => assert!(names.windows(2).all(|w| w[0] <= w[1])),
        }
    }
    // Rows added between pages do not shift the next page: no duplicate, no gap.
    let first = h.sql(json!({"sql": "SELECT id, name FROM item ORDER BY name", "limit": 100}));
    h.ok(
        "entities.create",
        json!({"type": "item", "name": "item 000 (late)"}),
    );
    let mut all: Vec<Value> = rows(&first);
    let mut cursor = first["next_cursor"].clone();
    while !cursor.is_null() {
        let r = h.sql(json!({"sql": "SELECT id, name FROM item ORDER BY name", "limit": 100, "cursor": cursor}));
        all.extend(rows(&r));
        cursor = r["next_cursor"].clone();
    }
    let mut ids: Vec<&str> = all.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 250, "the late row sorts before the cursor");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 250);
    // A cursor belongs to its query.
    let msg = h.sql_error(json!({"sql": "SELECT id FROM item", "cursor": first["next_cursor"]}));
    assert!(msg.contains("another query"), "{msg}");
    // An ORDER BY on an expression keeps the query's order and pages by position.
    let r = h.sql(
        json!({"sql": "SELECT name FROM item ORDER BY LENGTH(name) DESC, name", "limit": 200}),
    );
    let next = h.sql(json!({"sql": "SELECT name FROM item ORDER BY LENGTH(name) DESC, name", "limit": 200, "cursor": r["next_cursor"]}));
    assert_eq!(rows(&r).len() + rows(&next).len(), 251);
}

#[test]
fn every_write_and_ddl_form_is_refused_before_it_runs() {
    let h = Harness::new();
    h.seed();
    let before = h.dump();
    for sql in [
        "INSERT INTO entities (id, name) VALUES ('ent_x', 'x')",
        "INSERT INTO ticket SELECT * FROM ticket",
        "UPDATE entities SET name = 'pwned'",
        "UPDATE ticket SET points = 0 WHERE 1 = 1",
        "DELETE FROM entities",
        "DELETE FROM events WHERE kind = 'fact'",
        "CREATE TABLE t (a INT)",
        "CREATE TABLE t AS SELECT * FROM entities",
        "CREATE INDEX i ON entities (name)",
        "CREATE VIEW v AS SELECT * FROM entities",
        "DROP TABLE entities",
        "DROP INDEX i",
        "ALTER TABLE entities RENAME TO gone",
        "ALTER TABLE entities ADD COLUMN x INT",
        "TRUNCATE entities",
        "BEGIN",
        "COMMIT",
        "SELECT 1; DELETE FROM entities",
        "SELECT * FROM entities; DROP TABLE entities",
        "SELECT * INTO copy FROM entities",
        "SELECT * FROM entities FOR UPDATE",
        "WITH gone AS (DELETE FROM entities RETURNING *) SELECT * FROM gone",
        "WITH x AS (INSERT INTO entities (id) VALUES ('a') RETURNING id) SELECT * FROM x",
        "COPY entities TO '/tmp/x'",
        "GRANT SELECT ON entities TO public",
        "SET search_path = rival",
        "EXPLAIN DELETE FROM entities",
    ] {
        let r = h.tool(&h.owner, json!({"sql": sql}));
        assert_eq!(r["isError"], true, "{sql}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        let error: Value = serde_json::from_str(text).unwrap();
        assert_eq!(error["error"]["code"], "invalid_argument", "{sql}: {text}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("refused")
                || message.contains("one statement per call")
                || message.contains("only reads"),
            "{sql}: {message}"
        );
    }
    assert_eq!(h.dump(), before, "nothing was written");
    // Still readable afterwards.
    let r = h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM entities"}));
    assert_eq!(r["rows"], json!([[6]]));
}

#[test]
fn no_probe_reaches_another_org() {
    let h = Harness::new();
    h.seed();
    let probes = [
        "SELECT * FROM entities",
        "SELECT * FROM ticket",
        "SELECT * FROM relationships",
        "SELECT * FROM event_history",
        "SELECT * FROM rival.entities",
        "SELECT * FROM \"rival\".\"entities\"",
        "SELECT * FROM \"rival.entities\"",
        "SELECT * FROM \"o/rival/ent\"",
        "SELECT * FROM \"o/rival/ent-t/ticket\"",
        "SELECT * FROM \"../rival/entities\"",
        "SELECT * FROM \"entities\" -- ; SELECT * FROM rival.entities",
        "SELECT * FROM /* rival. */ entities",
        "SELECT * FROM entities /* ; SELECT * FROM rival.entities */",
        "SELECT name FROM entities UNION SELECT name FROM rival.entities",
        "SELECT name FROM entities UNION ALL SELECT name FROM \"rival\".entities",
        "SELECT name FROM entities UNION SELECT name FROM ticket",
        "SELECT * FROM entities WHERE id IN (SELECT id FROM rival.entities)",
        "SELECT * FROM entities WHERE EXISTS (SELECT 1 FROM \"o/rival/ent\")",
        "SELECT (SELECT name FROM rival.ticket LIMIT 1) AS x",
        "SELECT * FROM (SELECT * FROM rival.entities) t",
        "WITH e AS (SELECT * FROM rival.entities) SELECT * FROM e",
        "WITH entities AS (SELECT * FROM entities) SELECT * FROM entities",
        "SELECT * FROM entities e JOIN rival.entities r ON e.id = r.id",
        "SELECT * FROM entities, relationships, ticket",
        "SELECT * FROM GLUE_TABLES",
        "SELECT * FROM GLUE_TABLE_COLUMNS",
        "SELECT * FROM GLUE_OBJECTS",
        "SELECT * FROM \"ENTITIES\"",
        "SELECT * FROM Entities",
        "SELECT * FROM acme.entities",
        "SELECT * FROM public.entities",
        "SELECT * FROM entities WHERE author = 'rival'",
        "SELECT * FROM entities WHERE name LIKE 'RIVAL%'",
        "SELECT * FROM events WHERE content LIKE '%RIVAL%'",
        "SELECT $1 AS x",
        // The type condition pushed into loading never reaches outside the org's keys.
        "SELECT * FROM entities WHERE type = '../../rival/ent-t/ticket'",
        "SELECT * FROM entities WHERE type = 'ticket/../../../rival/ent-t/ticket'",
        "SELECT * FROM entities WHERE type IN ('ticket', 'o/rival/ent-t/ticket', '')",
        "SELECT * FROM entities WHERE type = $1",
        "SELECT * FROM entities e WHERE e.type = 'ticket' AND e.name LIKE 'RIVAL%'",
    ];
    let mut answered = 0;
    for sql in probes {
        for (org, token) in [("acme", &h.owner)] {
            let r = h.api_in(
                org,
                token,
                "sql.query",
                json!({"sql": sql, "params": ["RIVAL"], "limit": 1000}),
            );
            let text = r.body.to_string();
            if r.status == 200 {
                answered += 1;
                let body = if sql == "SELECT $1 AS x" {
                    // The parameter itself comes back, and nothing else.
                    assert_eq!(r.body["rows"], json!([["RIVAL"]]));
                    continue;
                } else {
                    text
                };
                assert!(!body.contains("RIVAL"), "{sql} leaked: {body}");
                assert!(!body.contains("rival"), "{sql} leaked: {body}");
            } else {
                assert_eq!(r.status, 400, "{sql}: {text}");
                assert!(!text.contains("RIVAL"), "{sql}: {text}");
            }
        }
    }
    assert!(answered >= 15, "most probes are valid queries: {answered}");
    // The rival org's own view has its rows, and acme's token cannot ask for it.
    let r = h.ok_in(
        "rival",
        &h.rival,
        "sql.query",
        json!({"sql": "SELECT COUNT(*) AS n FROM entities"}),
    );
    assert_eq!(r["rows"], json!([[3]]));
    let r = h.api_in(
        "rival",
        &h.owner,
        "sql.query",
        json!({"sql": "SELECT * FROM entities"}),
    );
    assert_eq!(r.status, 403, "{}", r.body);
}

#[test]
fn errors_name_the_problem() {
    let h = Harness::new();
    h.seed();
    let msg = h.sql_error(json!({"sql": "SELECT * FROM tickets"}));
    assert!(
        msg.contains("no table \"tickets\"")
            && msg.contains("entities, relationships, events")
            && msg.contains("person, ticket"),
        "{msg}"
    );
    let msg = h.sql_error(json!({"sql": "SELECT * FROM Ticket"}));
    assert!(msg.contains("did you mean ticket"), "{msg}");
    let msg = h.sql_error(json!({"sql": "SELECT titel FROM ticket"}));
    assert!(
        msg.contains("no column \"titel\"") && msg.contains("ticket(id, name, done"),
        "{msg}"
    );
    // On an empty table too, where the engine would never evaluate the column.
    h.ok("templates.create", json!({"name": "empty"}));
    let msg = h.sql_error(json!({"sql": "SELECT nope FROM empty"}));
    assert!(
        msg.contains("no column \"nope\"") && msg.contains("empty(id, name"),
        "{msg}"
    );
    let msg = h.sql_error(json!({"sql": "SELECT * FROM events WHERE kind = \"fact\""}));
    assert!(msg.contains("single quotes"), "{msg}");
    let msg = h.sql_error(json!({"sql": "SELEC * FROM entities"}));
    assert!(msg.contains("SELEC"), "{msg}");
    let msg = h.sql_error(json!({"sql": "SELECT id FROM entities", "order_by": "nope"}));
    assert!(
        msg.contains("not a result column") && msg.contains("id"),
        "{msg}"
    );
    let r = h.api_in(
        "acme",
        &h.owner,
        "sql.query",
        json!({"sql": "SELECT 1", "limit": 5000}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["field"], "limit", "{}", r.body);
}

#[test]
fn budgets_stop_runaway_queries_with_a_clear_error() {
    let config = Config {
        sql: lore_records::sql::Limits {
            max_loaded_rows: 60,
            max_row_visits: 5_000,
            time_ms: 1_000_000,
            max_result_bytes: 1 << 20,
            ..lore_records::sql::Limits::default()
        },
        ..Config::default()
    };
    let h = Harness::with(config);
    h.ok("templates.create", json!({"name": "item"}));
    let items: Vec<Value> = (0..40).map(|i| json!({"name": format!("i{i}")})).collect();
    h.ok(
        "entities.create_many",
        json!({"type": "item", "items": items}),
    );
    // 40 + 40 rows load; a triple cross join reads 40 * 40 * 40 rows.
    let msg = h.sql_error(
        json!({"sql": "SELECT COUNT(*) FROM item a JOIN item b ON TRUE JOIN item c ON TRUE"}),
    );
    assert!(
        msg.contains("read more than 5000 rows while running"),
        "{msg}"
    );
    let msg =
        h.sql_error(json!({"sql": "SELECT COUNT(*) FROM item a JOIN entities b ON a.id = b.id"}));
    assert!(msg.contains("reads more than 60 rows"), "{msg}");
    let r = h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM item a JOIN item b ON TRUE"}));
    assert_eq!(r["rows"], json!([[1600]]));

    // Time, from the clock port: the step clock advances 1 ms per reading.
    let config = Config {
        sql: lore_records::sql::Limits {
            time_ms: 3,
            ..lore_records::sql::Limits::default()
        },
        ..Config::default()
    };
    let h = Harness::with(config);
    h.ok("templates.create", json!({"name": "item"}));
    let items: Vec<Value> = (0..100).map(|i| json!({"name": format!("i{i}")})).collect();
    h.ok(
        "entities.create_many",
        json!({"type": "item", "items": items}),
    );
    let msg = h.sql_error(
        json!({"sql": "SELECT COUNT(*) FROM item a JOIN item b ON TRUE JOIN item c ON TRUE"}),
    );
    assert!(msg.contains("time budget"), "{msg}");
}

#[test]
fn a_page_over_one_megabyte_is_cut_and_continues() {
    let h = Harness::new();
    let big = "x".repeat(30_000);
    for i in 0..40 {
        h.ok(
            "memory.save",
            json!({"content": format!("{i:02} {big}"), "kind": "note"}),
        );
    }
    let mut total = 0;
    let mut cursor = Value::Null;
    let mut cut = 0;
    loop {
        let mut args = json!({"sql": "SELECT content FROM events ORDER BY content"});
        if !cursor.is_null() {
            args["cursor"] = cursor;
        }
        let r = h.sql(args);
        assert!(r.to_string().len() <= 1 << 20);
        total += r["row_count"].as_u64().unwrap();
        if r["truncated"] == true {
            cut += 1;
        }
        cursor = r["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(total, 40);
    assert_eq!(cut, 1, "40 × 30 KB: the first page is cut at 1 MB");
}

#[test]
fn the_tool_marks_rows_as_untrusted_data_and_members_read() {
    let h = Harness::new();
    h.seed();
    let viewer = h.token(Role::Viewer, "mcp:read");
    let r = h.tool(
        &viewer,
        json!({"sql": "SELECT content FROM events WHERE kind = 'fact'"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Untrusted content"),
        "{r}"
    );
    assert_eq!(r["_meta"]["lore/untrusted_content"], true);
    assert_eq!(
        r["structuredContent"]["rows"],
        json!([["Ada owns the auth service"]])
    );
    // A member sees only their own actions; the owner sees everyone's.
    let member = h.token(Role::Member, "mcp:read mcp:write");
    h.ok_in(
        "acme",
        &member,
        "entities.create",
        json!({"type": "person", "name": "Cy"}),
    );
    let mine = h.ok_in(
        "acme",
        &member,
        "sql.query",
        json!({"sql": "SELECT DISTINCT principal FROM actions"}),
    );
    assert_eq!(rows(&mine).len(), 1, "{mine}");
    let all = h.sql(json!({"sql": "SELECT DISTINCT principal FROM actions"}));
    assert_eq!(rows(&all).len(), 2, "{all}");
}

#[test]
fn sql_metrics_evaluate_through_the_engine() {
    let h = Harness::new();
    h.seed();
    h.ok(
        "metrics.define",
        json!({"name": "open_points", "sql": "SELECT SUM(points) AS value FROM ticket WHERE done = FALSE"}),
    );
    let v = h.ok("metrics.query", json!({"name": "open_points"}));
    assert_eq!(v["value"], 16.0, "{v}");
    h.ok(
        "metrics.define",
        json!({"name": "by_priority", "sql": "SELECT priority, COUNT(*) AS n FROM ticket GROUP BY priority", "value_column": "n"}),
    );
    let v = h.ok("metrics.query", json!({"name": "by_priority"}));
    assert_eq!(v["value"], 4.0, "{v}");
    assert_eq!(
        v["series"],
        json!([{"key": "high", "value": 2.0}, {"key": "low", "value": 2.0}])
    );
    let r = h.api_in(
        "acme",
        &h.owner,
        "metrics.define",
        json!({"name": "bad", "sql": "SELECT 1; DELETE FROM entities"}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    h.ok(
        "metrics.define",
        json!({"name": "wrong", "sql": "SELECT COUNT(*) AS n FROM entities"}),
    );
    let r = h.api_in("acme", &h.owner, "metrics.query", json!({"name": "wrong"}));
    assert_eq!(r.status, 400);
    assert!(
        r.body.to_string().contains("not its value column"),
        "{}",
        r.body
    );
    // Metrics are in SQL too.
    let r = h.sql(
        json!({"sql": "SELECT name, value_column FROM metrics WHERE kind = 'sql' ORDER BY name"}),
    );
    assert_eq!(
        r["rows"],
        json!([
            ["by_priority", "n"],
            ["open_points", "value"],
            ["wrong", "value"]
        ])
    );
}

/// A one-route HTTP server on loopback answering every request with `body`, counting them.
fn feed_server(body: &'static str) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let url = common::serve_http(move |_, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        ("200 OK".into(), body.to_string())
    });
    (url, hits)
}

#[test]
fn a_virtual_feed_is_read_live_and_never_stored() {
    let (url, hits) = feed_server(
        r#"{"data": [
            {"id": 1, "title": "Crash on start", "state": "open", "votes": 7},
            {"id": 2, "title": "Dark mode", "state": "closed", "votes": 12},
            {"id": 3, "title": "Export CSV", "state": "open", "votes": 3, "extra": {"k": true}}
        ]}"#,
    );
    let h = Harness::new();
    h.seed();
    h.ok(
        "connections.create",
        json!({"name": "tracker", "base_url": url, "secret": "s3cret"}),
    );
    h.ok(
        "feeds.create",
        json!({"name": "issues", "kind": "virtual", "connection": "tracker", "path": "/issues",
            "items_pointer": "/data", "content_pointer": "/title"}),
    );
    let before = h.dump();
    let r = h.sql(json!({"sql": "SELECT id, title, votes FROM issues WHERE state = 'open' ORDER BY votes DESC"}));
    assert_eq!(
        r["rows"],
        json!([["1", "Crash on start", 7], ["3", "Export CSV", 3]])
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "fetched once, at query time"
    );
    let r = h.sql(json!({"sql": "SELECT * FROM issues ORDER BY id"}));
    assert_eq!(
        r["columns"],
        json!(["id", "content", "item", "state", "title", "votes", "extra"])
    );
    assert_eq!(rows(&r)[0][1], "Crash on start");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "fetched again: nothing is cached"
    );
    // Joined with stored tables.
    let r = h.sql(json!({"sql": "SELECT i.title, t.name FROM issues i JOIN ticket t ON t.points = i.votes - 2"}));
    assert_eq!(
        r["rows"],
        json!([
            ["Crash on start", "Login fails"],
            ["Export CSV", "Typo on home"]
        ])
    );
    // Nothing was stored: no key changed, and no item became an event.
    assert_eq!(h.dump(), before);
    let r =
        h.sql(json!({"sql": "SELECT COUNT(*) FROM event_history WHERE content LIKE '%Crash%'"}));
    assert_eq!(r["rows"], json!([[0]]));
    // Tables not named are not fetched.
    let n = hits.load(Ordering::SeqCst);
    h.sql(json!({"sql": "SELECT * FROM feeds"}));
    assert_eq!(hits.load(Ordering::SeqCst), n);
}

/// The same query with every `type` condition hidden from push-down (`LOWER(type)` equals
/// `type` for type names, which are lowercase): it must give the same rows.
fn unpushed(sql: &str) -> String {
    sql.replace("entities.type =", "LOWER(entities.type) =")
        .replace(" e.type =", " LOWER(e.type) =")
        .replace("e.type IN", "LOWER(e.type) IN")
        .replace(" type =", " LOWER(type) =")
        .replace(" type IN", " LOWER(type) IN")
        .replace("(type =", "(LOWER(type) =")
        .replace("= type", "= LOWER(type)")
}

#[test]
fn type_push_down_gives_the_rows_a_full_scan_gives() {
    let h = Harness::new();
    h.seed();
    let cases: &[(&str, Value)] = &[
        (
            "SELECT id, name FROM entities WHERE type = 'ticket' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE 'person' = type ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type = 'ticket' OR name = 'Ada' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE NOT (type = 'ticket') ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type <> 'ticket' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE (type = 'ticket' OR type = 'person') AND name >= 'B' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type IN ('person', 'ticket') AND name >= 'B' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type NOT IN ('person') ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type = 'ticket' AND type = 'person'",
            json!([]),
        ),
        ("SELECT name FROM entities WHERE type = 'nosuch'", json!([])),
        (
            "SELECT name FROM entities WHERE type = $1 ORDER BY name",
            json!(["person"]),
        ),
        (
            "SELECT name FROM entities WHERE type IN ($1, 'ticket') ORDER BY name",
            json!(["person"]),
        ),
        (
            "SELECT name FROM entities WHERE type = $1 ORDER BY name",
            json!([3]),
        ),
        (
            "SELECT type, COUNT(*) AS n FROM entities WHERE type IN ('ticket', 'person') GROUP BY type ORDER BY type",
            json!([]),
        ),
        (
            "SELECT id FROM entities WHERE type IN ('ticket', 'person')",
            json!([]),
        ),
        (
            "SELECT e.name, r.type FROM entities e JOIN relationships r ON r.to_id = e.id WHERE e.type = 'person' ORDER BY e.name",
            json!([]),
        ),
        (
            "SELECT r.id, e.name FROM relationships r LEFT JOIN entities e ON e.id = r.to_id WHERE e.type = 'person' ORDER BY r.id",
            json!([]),
        ),
        (
            "SELECT r.id, e.name FROM relationships r LEFT JOIN entities e ON e.id = r.to_id AND e.type = 'person' ORDER BY r.id",
            json!([]),
        ),
        (
            "SELECT name FROM ticket WHERE id IN (SELECT from_id FROM relationships WHERE to_id IN (SELECT id FROM entities WHERE type = 'person' AND name = 'Ada')) ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type = 'ticket' AND id NOT IN (SELECT id FROM entities WHERE type = 'person') ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE id IN (SELECT id FROM entities WHERE type = 'person') ORDER BY name",
            json!([]),
        ),
        (
            "WITH p AS (SELECT id, name FROM entities WHERE type = 'person') SELECT name FROM p ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name, (SELECT COUNT(*) FROM relationships r WHERE r.to_id = entities.id) AS n FROM entities WHERE entities.type = 'person' ORDER BY name",
            json!([]),
        ),
        (
            "SELECT name FROM entities WHERE type = 'ticket' AND name LIKE '%o%' ORDER BY name",
            json!([]),
        ),
    ];
    let mut nonempty = 0;
    for (sql, params) in cases {
        let pushed = h.sql(json!({"sql": sql, "params": params, "limit": 1000}));
        let reference = unpushed(sql);
        assert!(
            lore_records::sql::statement::parse(&reference)
                .unwrap()
                .entity_types
                .is_empty(),
            "the reference must not push down: {reference}"
        );
        let full = h.sql(json!({"sql": reference, "params": params, "limit": 1000}));
        assert_eq!(pushed["columns"], full["columns"], "{sql}");
        assert_eq!(pushed["rows"], full["rows"], "{sql}");
        nonempty += usize::from(!rows(&pushed).is_empty());
    }
    assert!(nonempty >= 15, "most cases have rows: {nonempty}");
    // OR is not narrowed: Ada (a person) is found beside the tickets.
    let r = h.sql(json!({"sql": "SELECT name FROM entities WHERE type = 'ticket' OR name = 'Ada' ORDER BY name"}));
    assert_eq!(
        rows(&r),
        [
            json!(["Ada"]),
            json!(["Data loss on save"]),
            json!(["Login fails"]),
            json!(["Slow search"]),
            json!(["Typo on home"])
        ]
    );
    let r = h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM entities WHERE NOT (type = 'ticket')"}));
    assert_eq!(rows(&r), [json!([2])]);
}

/// Another instance on the same storage (another worker or process).
fn other_instance(h: &Harness) -> Lore {
    Lore::new(h.lore.ports().clone(), Config::default())
}

fn api_on(lore: &Lore, token: &str, name: &str, args: Value) -> Value {
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("/api/acme/{name}"))
        .header("host", "127.0.0.1:8787")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&args).unwrap())
        .unwrap();
    let response = block_on(lore.handle(req));
    assert_eq!(response.status().as_u16(), 200);
    serde_json::from_slice(&response.into_body()).unwrap()
}

/// Every entity's name in acme, as its owner sees them through SQL.
fn names(h: &Harness) -> Vec<Value> {
    rows(&h.sql(json!({"sql": "SELECT name FROM entities ORDER BY name", "limit": 1000})))
}

#[test]
fn the_table_cache_sees_every_write_and_keeps_orgs_and_members_apart() {
    let h = Harness::new();
    h.seed();
    let tickets = |h: &Harness| -> Vec<Value> {
        rows(&h.sql(json!({"sql": "SELECT name, points FROM ticket WHERE points > 0 ORDER BY name", "limit": 1000})))
    };
    let before = names(&h);
    assert_eq!(before.len(), 6);
    let (_, _, hits, _) = h.lore.engine.sql_cache.stats();
    assert_eq!(names(&h), before);
    let (entries, bytes, hits_after, _) = h.lore.engine.sql_cache.stats();
    assert_eq!(
        hits_after,
        hits + 1,
        "the repeated query is served from the cache"
    );
    assert!(entries >= 1 && bytes > 0);
    tickets(&h);

    // Create, update, delete: each shows at once.
    let cy = h.ok("entities.create", json!({"type": "person", "name": "Cy"}));
    assert!(names(&h).contains(&json!(["Cy"])));
    h.ok("entities.update", json!({"id": cy["id"], "name": "Cyd"}));
    let now = names(&h);
    assert!(now.contains(&json!(["Cyd"])) && !now.contains(&json!(["Cy"])));
    h.ok("entities.delete", json!({"id": cy["id"]}));
    assert_eq!(names(&h), before);
    let t = h.ok(
        "entities.create",
        json!({"type": "ticket", "name": "Zed", "properties": {"points": 2}}),
    );
    assert!(tickets(&h).contains(&json!(["Zed", 2])));
    h.ok(
        "entities.update",
        json!({"id": t["id"], "properties": {"points": 9}}),
    );
    assert!(tickets(&h).contains(&json!(["Zed", 9])));
    h.ok("entities.delete", json!({"id": t["id"]}));

    // Relationships.
    let count =
        |h: &Harness| rows(&h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM relationships"})));
    assert_eq!(count(&h), [json!([3])]);
    assert_eq!(count(&h), [json!([3])]);
    let ids: Vec<Value> = rows(&h.sql(json!({"sql": "SELECT id FROM entities ORDER BY id"})));
    let rel = h.ok(
        "relationships.create",
        json!({"type": "knows", "from": ids[0][0], "to": ids[1][0]}),
    );
    assert_eq!(count(&h), [json!([4])]);
    h.ok("relationships.delete", json!({"id": rel["id"]}));
    assert_eq!(count(&h), [json!([3])]);

    // A script's buffered writes show once the run commits; a failed run's never do.
    let r = h.tool_named(
        &h.owner,
        "run_sdk",
        json!({"code": "const rows = await client.sql.query({sql: 'SELECT name FROM entities'});\nawait client.entities.create({type: 'person', name: 'Scripted'});\nconst again = await client.sql.query({sql: 'SELECT name FROM entities'});\nreturn [rows.row_count, again.row_count]"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["result"], json!([6, 7]), "{r}");
    assert!(names(&h).contains(&json!(["Scripted"])));
    let r = h.tool_named(
        &h.owner,
        "run_sdk",
        json!({"code": "await client.entities.create({type: 'person', name: 'Doomed'});\nawait client.sql.query({sql: 'SELECT name FROM entities'});\nthrow new Error('no')"}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(!names(&h).contains(&json!(["Doomed"])));

    // A write by another instance (another worker or process) shows too.
    let other = other_instance(&h);
    api_on(
        &other,
        &h.owner,
        "entities.create",
        json!({"type": "person", "name": "Elsewhere"}),
    );
    assert!(names(&h).contains(&json!(["Elsewhere"])));

    // Orgs: the rival's query on the same instance sees its rows only, and acme still its own.
    let acme = names(&h);
    for _ in 0..2 {
        let r = h.ok_in(
            "rival",
            &h.rival,
            "sql.query",
            json!({"sql": "SELECT name FROM entities ORDER BY name"}),
        );
        assert_eq!(rows(&r).len(), 3);
        assert!(r.to_string().contains("RIVAL") && !r.to_string().contains("Ada"));
        assert_eq!(names(&h), acme);
    }

    // Members: entities are the same for everyone; actions stay each member's own.
    let member = h.token(lore_base::model::Role::Member, "mcp:read mcp:write");
    let as_member = |sql: &str| {
        rows(&h.ok_in(
            "acme",
            &member,
            "sql.query",
            json!({"sql": sql, "limit": 1000}),
        ))
    };
    assert_eq!(as_member("SELECT name FROM entities ORDER BY name"), acme);
    let all_actions = rows(&h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM actions"})));
    assert_ne!(all_actions, [json!([0])]);
    for _ in 0..2 {
        assert_eq!(as_member("SELECT COUNT(*) AS n FROM actions"), [json!([0])]);
        assert_eq!(
            rows(&h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM actions"}))),
            all_actions
        );
    }
}

#[test]
fn the_instances_own_writes_keep_its_cached_tables_current() {
    // A write through this instance applies itself to the tables the instance keeps, so the
    // next query is served from them (a hit, no storage scan) and answers exactly what a fresh
    // load answers, on every kind of cached table: all entities, a typed table, entities of
    // some types (push-down), relationships.
    let h = Harness::new();
    h.seed();
    let mut config = Config::default();
    config.sql.cache_bytes = 0;
    let fresh = Lore::new(h.lore.ports().clone(), config);
    let queries = [
        "SELECT * FROM entities",
        "SELECT id, name, version FROM entities ORDER BY name DESC",
        "SELECT type, COUNT(*) AS n FROM entities GROUP BY type ORDER BY type",
        "SELECT * FROM ticket",
        "SELECT name, points FROM ticket WHERE points > 2 ORDER BY points",
        "SELECT id, name FROM entities WHERE type IN ('person', 'ticket') ORDER BY id",
        "SELECT name FROM entities WHERE type = 'person'",
        "SELECT * FROM relationships",
    ];
    let check = |step: &str, expect_hits: bool| {
        let (_, _, hits_before, misses_before) = h.lore.engine.sql_cache.stats();
        for sql in queries {
            let mine = rows(&h.sql(json!({"sql": sql, "limit": 1000})));
            let theirs = rows(&api_on(
                &fresh,
                &h.owner,
                "sql.query",
                json!({"sql": sql, "limit": 1000}),
            ));
            assert_eq!(mine, theirs, "{step}: {sql}");
        }
        let (_, _, hits, misses) = h.lore.engine.sql_cache.stats();
        if expect_hits {
            assert_eq!(
                (hits - hits_before, misses - misses_before),
                (queries.len() as u64, 0),
                "{step}: every table came from the cache"
            );
        }
    };
    check("loaded", false);
    check("repeated", true);

    let cy = h.ok(
        "entities.create",
        json!({"type": "person", "name": "Cy", "properties": {"team": "ops"}}),
    );
    check("created", true);
    h.ok(
        "entities.update",
        json!({"id": cy["id"], "name": "Cyd", "properties": {"team": null}}),
    );
    check("updated", true);
    let items: Vec<Value> = (0..30)
        .map(|i| json!({"name": format!("bulk {i:02}"), "properties": {"points": i}}))
        .collect();
    let bulk = h.ok(
        "entities.create_many",
        json!({"type": "ticket", "items": items}),
    );
    check("created many", true);
    let ids: Vec<Value> =
        rows(&h.sql(json!({"sql": "SELECT id FROM entities WHERE type = 'ticket' ORDER BY id"})));
    let rel = h.ok(
        "entities.link",
        json!({"id": ids[0][0], "type": "blocks", "to": cy["id"]}),
    );
    check("linked", true);
    h.ok("relationships.delete", json!({"id": rel["id"]}));
    check("unlinked", true);
    h.ok(
        "entities.link",
        json!({"id": bulk["items"][3]["id"], "type": "blocks", "to": cy["id"]}),
    );
    // Deleting an entity deletes its edges in the same batch.
    h.ok("entities.delete", json!({"id": cy["id"]}));
    check("deleted with its edges", true);
    // A script's writes commit as one batch of their own when the run ends: the copies go
    // stale and are loaded again, then kept current as before.
    let r = h.tool_named(
        &h.owner,
        "run_sdk",
        json!({"code": format!("await client.Ticket.update({{id: '{}', properties: {{points: 40}}}}); await client.entities.create({{type: 'person', name: 'Scripted'}}); return 1", ids[1][0].as_str().unwrap())}),
    );
    assert_eq!(r["isError"], false, "{r}");
    check("after a script's writes", false);
    h.ok("entities.create", json!({"type": "person", "name": "Dee"}));
    check("created after the script", true);

    // A write that fails changes nothing, here or in the copies.
    let r = h.api_in(
        "acme",
        &h.owner,
        "entities.update",
        json!({"id": ids[1][0], "name": "x", "version": 1}),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    check("after a refused write", true);
}

#[test]
fn a_write_after_another_instances_write_does_not_patch_a_stale_copy() {
    // This instance's copies are at the version it last read; another instance writes; then
    // this one writes. Its batch's condition on the version fails, it commits without it, and
    // the copies (which lack the other write) are not served again.
    let h = Harness::new();
    h.seed();
    names(&h);
    let other = other_instance(&h);
    api_on(
        &other,
        &h.owner,
        "entities.create",
        json!({"type": "person", "name": "Elsewhere"}),
    );
    h.ok("entities.create", json!({"type": "person", "name": "Here"}));
    // The write found another version: the copies are gone, so the next writes do not
    // require a version that no longer holds (each would fail once and commit again).
    assert_eq!(h.lore.engine.sql_cache.stats().0, 0);
    let now = names(&h);
    assert!(
        now.contains(&json!(["Elsewhere"])) && now.contains(&json!(["Here"])),
        "{now:?}"
    );
    // And from then on the copies follow this instance's writes again.
    h.ok(
        "entities.create",
        json!({"type": "person", "name": "Again"}),
    );
    let (_, _, hits, _) = h.lore.engine.sql_cache.stats();
    assert!(names(&h).contains(&json!(["Again"])));
    let (_, _, hits_after, _) = h.lore.engine.sql_cache.stats();
    assert_eq!(hits_after, hits + 1);
}

#[test]
fn instances_that_share_a_table_cache_keep_it_current_for_each_other() {
    // `lore serve`'s workers share one cache: a write through one worker keeps the copies the
    // others read.
    let h = Harness::new();
    h.seed();
    let other = Lore::new(h.lore.ports().clone(), Config::default())
        .with_sql_cache(h.lore.engine.sql_cache.clone());
    names(&h);
    api_on(
        &other,
        &h.owner,
        "entities.create",
        json!({"type": "person", "name": "Through the other"}),
    );
    let (_, _, hits, misses) = h.lore.engine.sql_cache.stats();
    assert!(names(&h).contains(&json!(["Through the other"])));
    let (_, _, hits_after, misses_after) = h.lore.engine.sql_cache.stats();
    assert_eq!((hits_after, misses_after), (hits + 1, misses));
}

#[test]
fn an_org_without_a_records_version_is_not_cached() {
    // Rows written before the version existed (or an org deleted and made again under the
    // same name) must not be served from a copy nobody can invalidate.
    let h = Harness::new();
    h.seed();
    block_on(async {
        let mut batch = lore_base::storage::Batch::new();
        batch.delete("o/acme/meta/records-version");
        h.lore.ports().storage.commit(batch).await
    })
    .unwrap();
    for _ in 0..2 {
        h.sql(json!({"sql": "SELECT name FROM entities"}));
    }
    let (entries, _, hits, _) = h.lore.engine.sql_cache.stats();
    assert_eq!((entries, hits), (0, 0));
    h.ok("entities.create", json!({"type": "person", "name": "Cy"}));
    for _ in 0..2 {
        h.sql(json!({"sql": "SELECT name FROM entities"}));
    }
    let (entries, _, hits, _) = h.lore.engine.sql_cache.stats();
    assert_eq!((entries, hits), (1, 1));
}

#[test]
fn a_disabled_table_cache_keeps_nothing() {
    let mut config = Config::default();
    config.sql.cache_bytes = 0;
    let h = Harness::with(config);
    h.seed();
    for _ in 0..2 {
        h.sql(json!({"sql": "SELECT name FROM entities"}));
    }
    assert_eq!(h.lore.engine.sql_cache.stats(), (0, 0, 0, 0));
}

#[test]
fn the_table_cache_stays_within_its_bytes() {
    let mut config = Config::default();
    config.sql.cache_bytes = 4096;
    let h = Harness::with(config);
    h.seed();
    for sql in [
        "SELECT * FROM entities",
        "SELECT name FROM entities",
        "SELECT * FROM relationships",
        "SELECT * FROM ticket",
        "SELECT name FROM person",
    ] {
        h.sql(json!({"sql": sql}));
        let (_, bytes, _, _) = h.lore.engine.sql_cache.stats();
        assert!(bytes <= 4096, "{sql}: {bytes}");
    }
}

#[test]
fn no_query_builds_a_value_or_holds_a_total_past_its_bounds() {
    let h = Harness::new();
    h.ok("templates.create", json!({"name": "item"}));
    let items: Vec<Value> = (0..50).map(|i| json!({"name": format!("i{i}")})).collect();
    h.ok(
        "entities.create_many",
        json!({"type": "item", "items": items}),
    );
    // Every shape that multiplies a value past the bound is refused before anything runs,
    // whoever asks (a viewer's token suffices to try), naming the limit.
    let viewer = h.token(Role::Viewer, "mcp:read");
    for sql in [
        "SELECT REPEAT(REPEAT('x', 65536), 65536)",
        "SELECT REPEAT(REPEAT(REPEAT(name, 40), 40), 40) FROM item",
        "SELECT LPAD(LPAD('x', 60000), 9000000)",
        "SELECT RPAD(name, 1000000, 'ab') FROM item",
        "SELECT REPLACE(REPLACE(REPLACE(name, 'i', 'iiiiiiii'), 'i', 'iiiiiiii'), 'i', 'iiiiiiii') FROM item",
        "SELECT REPLACE(name, '', REPEAT('y', 1000)) FROM item",
        "SELECT UPPER(LOWER(UPPER(REPEAT(name, 10)))) FROM item",
        "SELECT CONCAT(REPEAT('a', 700000), REPEAT('b', 700000))",
        "SELECT REPEAT('a', 700000) || REPEAT('b', 700000)",
        "SELECT name FROM item WHERE REPEAT(REPEAT(name, 100), 100) <> ''",
        "SELECT name FROM item ORDER BY REPEAT(REPEAT(name, 100), 100)",
        "SELECT COUNT(*) FROM item GROUP BY REPEAT(REPEAT(name, 100), 100)",
        "WITH t AS (SELECT REPEAT(REPEAT('q', 5000), 5000) AS v) SELECT v FROM t",
        "SELECT (SELECT REPEAT(REPEAT('q', 5000), 5000))",
        "SELECT CASE WHEN name = 'x' THEN name ELSE REPEAT(REPEAT('q', 5000), 5000) END FROM item",
        "SELECT REPEAT(name, $1) FROM item",
        // A chain of WITH tables, each multiplying the column before it (the probe's shape),
        // and the same through derived tables and a subquery: bounded as a whole.
        "WITH a AS (SELECT REPEAT(name, 16) AS s FROM item), b AS (SELECT REPEAT(s, 16) AS s FROM a), c AS (SELECT REPEAT(s, 16) AS s FROM b) SELECT LENGTH(s) FROM c",
        "WITH a AS (SELECT name || name AS s FROM item), b AS (SELECT s || s AS s FROM a), c AS (SELECT s || s AS s FROM b), d AS (SELECT s || s AS s FROM c), e AS (SELECT s || s AS s FROM d) SELECT LENGTH(s) FROM e",
        "SELECT LENGTH(REPEAT(d.s, 16)) FROM (SELECT REPEAT(name, 16) AS s FROM item) d",
        "SELECT LENGTH(x.s) FROM (SELECT REPEAT(y.s, 4) AS s FROM (SELECT REPEAT(z.s, 4) AS s FROM (SELECT REPEAT(name, 4) AS s FROM item) z) y) x",
    ] {
        let r = h.api_in(
            "acme",
            &viewer,
            "sql.query",
            json!({"sql": sql, "params": [1000000]}),
        );
        assert_eq!(r.status, 400, "{sql}: {}", r.body);
        let message = r.body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("copies of the data") || message.contains("takes a length written"),
            "{sql}: {message}"
        );
    }
    // Within the bounds, values are built.
    let r = h.sql(json!({"sql": "SELECT REPEAT('ab', 1000) AS a, LPAD(name, 8, '.') AS b, UPPER(REPEAT(name, 4)) AS c FROM item WHERE name = 'i7'"}));
    assert_eq!(r["rows"][0][0].as_str().unwrap().len(), 2000);
    assert_eq!(r["rows"][0][1], "......i7");
    assert_eq!(r["rows"][0][2], "I7I7I7I7");
}

#[test]
fn a_query_that_holds_too_much_while_it_runs_is_stopped() {
    assert!(lore_meter::installed(), "needs the metered allocator");
    let config = Config {
        sql: lore_records::sql::Limits {
            max_query_bytes: 1 << 20,
            ..lore_records::sql::Limits::default()
        },
        ..Config::default()
    };
    let h = Harness::with(config);
    h.ok("templates.create", json!({"name": "item"}));
    for chunk in 0..4 {
        let items: Vec<Value> = (0..500)
            .map(|i| json!({"name": format!("i{chunk}-{i}")}))
            .collect();
        h.ok(
            "entities.create_many",
            json!({"type": "item", "items": items}),
        );
    }
    // 2,000 rows of 4 KB each, kept for the sort: past 1 MiB.
    let msg = h.sql_error(
        json!({"sql": "SELECT name || REPEAT('x', 4000) AS big FROM item ORDER BY big DESC"}),
    );
    assert!(msg.contains("held more than 1 MiB"), "{msg}");
    let r = h.sql(json!({"sql": "SELECT COUNT(*) AS n FROM item"}));
    assert_eq!(r["rows"], json!([[2000]]));
    // The query is metered as a whole: WITH tables kept while the rest runs count, however
    // the query is split among them (each alone would stay under the limit).
    let msg = h.sql_error(json!({"sql": "WITH a AS (SELECT name || REPEAT('x', 200) AS s FROM item), b AS (SELECT REPEAT('y', 200) AS s FROM a), c AS (SELECT REPEAT('z', 200) AS s FROM b) SELECT COUNT(*) FROM c"}));
    assert!(msg.contains("held more than 1 MiB"), "{msg}");
}
