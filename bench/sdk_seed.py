"""Seeds and checks the data of bench/sdk.sh. Standard library only.

  python3 sdk_seed.py seed LORE_URL ORG TOKEN ENTITIES OUT_DIR
      Defines the `ticket` entity type (a JSON Schema with an enum, integers, strings, an array),
      creates ENTITIES tickets through `POST /api/{org}/entities.create_many` (500 per call),
      then walks `entities.list` to collect every id in creation (key) order and writes
      OUT_DIR/ids.txt (a random sample of ids, one per line) and OUT_DIR/cursors.txt (a random
      sample of cursors, each followed by at least one full page of 100 and a next page).

  python3 sdk_seed.py check LORE_URL ORG TOKEN PEER_URL OUT_DIR
      For a few sampled ids and cursors, asks lore (`entities.get`, `entities.list`) and the
      peer (`/get`, `/list`) and fails unless both answer 200 with the same JSON (pages of 100
      with a next_cursor).
"""

import json
import random
import sys
import time
import urllib.error
import urllib.request

PAGE = 100
ID_SAMPLE = 10_000
CURSOR_SAMPLE = 1_000

SCHEMA = {
    "type": "object",
    "properties": {
        "status": {"enum": ["open", "in_progress", "blocked", "done"]},
        "priority": {"type": "integer", "minimum": 0, "maximum": 4},
        "assignee": {"type": "string", "maxLength": 100},
        "team": {"type": "string"},
        "customer": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "estimate_hours": {"type": "number", "minimum": 0},
    },
    "required": ["status", "priority"],
    "additionalProperties": False,
}

PEOPLE = ["alice", "bogdan", "chen", "dalia", "emeka", "farah", "gustavo", "hiroshi", "ingrid",
          "jamal", "keiko", "lars", "mariana", "nikolai", "olu", "priya", "rosa", "sven"]
TEAMS = ["billing", "payments", "search", "infrastructure", "mobile", "growth", "security",
         "identity", "onboarding", "analytics"]
CUSTOMERS = ["Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics", "Hooli",
             "Pied Piper", "Vandelay Imports", "Tyrell Robotics", "Oceanic Airlines"]
SYSTEMS = ["checkout", "the invoice generator", "the Postgres primary", "the Kafka cluster",
           "the GraphQL gateway", "the nightly ETL job", "SSO", "the webhook relay",
           "the PDF renderer", "the rate limiter", "the mobile push service", "search indexing"]
PROBLEMS = ["times out under load", "returns stale data", "drops requests", "fails after the upgrade",
            "is slow for large accounts", "logs a stack trace on every call", "double-charges retries",
            "ignores the feature flag"]
LABELS = ["bug", "regression", "customer", "p1", "infra", "ux", "backend", "frontend", "flaky"]


def post(url, token, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json",
        **({"authorization": f"Bearer {token}"} if token else {}),
    })
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def call(base, org, token, method, body):
    status, out = post(f"{base}/api/{org}/{method}", token, body)
    if status != 200:
        sys.exit(f"{method}: HTTP {status}: {str(out)[:500]}")
    return out


def ticket(rng):
    props = {
        "status": rng.choice(SCHEMA["properties"]["status"]["enum"]),
        "priority": rng.randrange(5),
        "assignee": rng.choice(PEOPLE),
        "team": rng.choice(TEAMS),
        "labels": rng.sample(LABELS, rng.randrange(4)),
        "estimate_hours": round(rng.uniform(0.5, 40), 1),
    }
    if rng.random() < 0.4:
        props["customer"] = rng.choice(CUSTOMERS)
    name = f"{rng.choice(SYSTEMS).capitalize()} {rng.choice(PROBLEMS)}"
    return {"name": name, "properties": props}


def seed(base, org, token, total, out):
    rng = random.Random(7)
    call(base, org, token, "manage_templates",
         {"action": "create", "name": "ticket", "description": "A support or engineering ticket.",
          "schema": SCHEMA})
    started = time.time()
    made = 0
    while made < total:
        n = min(500, total - made)
        page = call(base, org, token, "entities.create_many",
                    {"type": "ticket", "items": [ticket(rng) for _ in range(n)]})
        made += len(page["items"])
    print(f"   created {made:,} tickets in {time.time() - started:.1f} s (create_many, 500 per call)",
          file=sys.stderr)

    ids, cursor = [], None
    while True:
        body = {"type": "ticket", "limit": 500}
        if cursor:
            body["cursor"] = cursor
        page = call(base, org, token, "entities.list", body)
        ids += [e["id"] for e in page["items"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    if len(ids) != total or len(set(ids)) != total:
        sys.exit(f"entities.list walked {len(ids):,} ids ({len(set(ids)):,} distinct), expected {total:,}")
    # A cursor is the ULID of the last entity of the previous page. Any entity but the last
    # PAGE + 1 starts a full page that has a next page.
    cursors = [i[len("ent_"):] for i in ids[:total - PAGE - 1]]
    with open(f"{out}/ids.txt", "w") as f:
        f.write("\n".join(rng.sample(ids, min(ID_SAMPLE, len(ids)))) + "\n")
    with open(f"{out}/cursors.txt", "w") as f:
        f.write("\n".join(rng.sample(cursors, min(CURSOR_SAMPLE, len(cursors)))) + "\n")
    print(f"   listed all {len(ids):,} ids back; sampled {min(ID_SAMPLE, len(ids)):,} ids and "
          f"{min(CURSOR_SAMPLE, len(cursors)):,} cursors", file=sys.stderr)


def check(base, org, token, peer, out):
    ids = open(f"{out}/ids.txt").read().split()
    cursors = open(f"{out}/cursors.txt").read().split()
    sizes = {}
    for i in ids[:50]:
        a = call(base, org, token, "entities.get", {"id": i})
        status, b = post(f"{peer}/get", None, {"id": i})
        if status != 200 or a != b or a["id"] != i:
            sys.exit(f"get {i}: lore {json.dumps(a)[:300]} != peer HTTP {status} {json.dumps(b)[:300]}")
        sizes.setdefault("get", len(json.dumps(a, separators=(",", ":"))))
    for c in cursors[:20]:
        body = {"type": "ticket", "limit": PAGE, "cursor": c}
        a = call(base, org, token, "entities.list", body)
        status, b = post(f"{peer}/list", None, body)
        if status != 200 or a != b or len(a["items"]) != PAGE or not a.get("next_cursor"):
            sys.exit(f"list after {c}: lore and peer differ or the page is not full "
                     f"(lore {len(a['items'])} items, peer HTTP {status})")
        sizes.setdefault("list", len(json.dumps(a, separators=(",", ":"))))
    print(f"   lore and the peer answer the same JSON for 50 gets and 20 pages of {PAGE} "
          f"(about {sizes['get']:,} and {sizes['list']:,} bytes)", file=sys.stderr)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "seed":
        seed(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
    elif mode == "check":
        check(*sys.argv[2:7])
    else:
        sys.exit(__doc__)
