"""Seeds a lore server with 1,000 varied memories for bench/run.sh, then checks that every
benchmark query finds something. Standard library only.

Usage: python3 seed.py URL TOKEN QUERIES [COUNT]
  QUERIES: '|'-separated search queries that must each return at least one result.
  COUNT: how many memories (default 1,000).
"""

import json
import random
import sys
import urllib.request

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

PEOPLE = ["Alice", "Bogdan", "Chen", "Dalia", "Emeka", "Farah", "Gustavo", "Hiroshi", "Ingrid",
          "Jamal", "Keiko", "Lars", "Mariana", "Nikolai", "Olu", "Priya", "Quentin", "Rosa",
          "Sven", "Tamar", "Ugo", "Valentina", "Wen", "Yusuf", "Zofia"]
TEAMS = ["billing", "payments", "search", "infrastructure", "mobile", "growth", "security",
         "data platform", "support tooling", "identity", "onboarding", "analytics", "design systems",
         "compliance", "developer experience", "release engineering", "customer success", "sales ops"]
SYSTEMS = ["the invoice generator", "the Postgres primary", "the Kafka cluster", "the Redis cache",
           "the GraphQL gateway", "the nightly ETL job", "the feature flag service", "the S3 archive",
           "the Elasticsearch index", "the CI pipeline", "the Kubernetes ingress", "the webhook relay",
           "the recommendation model", "the audit log", "the SSO bridge", "the email dispatcher",
           "the PDF renderer", "the rate limiter", "the mobile push service", "the warehouse loader",
           "the Terraform state bucket", "the Grafana dashboards", "the Stripe integration",
           "the Salesforce sync", "the Snowflake warehouse", "the CDN edge config",
           "the Android release train", "the iOS build machines", "the OAuth token store",
           "the tax calculation service"]
CUSTOMERS = ["Acme Corp", "Globex", "Initech", "Umbrella Health", "Stark Logistics",
             "Wayne Retail", "Hooli", "Pied Piper", "Vandelay Imports", "Soylent Foods",
             "Tyrell Robotics", "Cyberdyne Labs", "Wonka Confectionery", "Oceanic Airlines"]
TOOLS = ["Linear", "Jira", "Notion", "Figma", "Datadog", "PagerDuty", "Sentry", "GitHub Actions",
         "Buildkite", "Slack", "Looker", "dbt", "Airflow", "Vault", "Okta", "Zendesk"]
REASONS = ["to cut cloud spend", "after the March outage", "because latency regressed",
           "to satisfy the SOC 2 auditors", "so on-call gets fewer false pages",
           "after a customer escalation", "to unblock the EU launch", "because the vendor raised prices",
           "to simplify onboarding", "after the load test failed", "to meet the GDPR deadline",
           "because the old library is unmaintained", "to halve build times",
           "since the data was drifting", "to support multi-region failover"]
WHEN = ["every Monday", "at the end of each sprint", "before each release", "on the first of the month",
        "during the quarterly review", "every night at 02:00 UTC", "whenever a deploy fails",
        "twice a week", "at the start of each on-call shift", "after every incident"]
NUMS = ["three", "five", "seven", "ten", "twelve", "fifteen", "thirty", "ninety"]
TIME_UNITS = ["seconds", "minutes", "hours", "days"]
SIZE_UNITS = ["percent more memory", "more gigabytes of disk", "more replicas", "percent more CPU"]
PREFS = ["dark mode in the admin console", "async standups over video calls",
         "written design docs before any code review", "squash merges on the main branch",
         "TypeScript over plain JavaScript", "metric units in all reports", "short weekly summaries",
         "pairing on risky migrations", "tabs over spaces in Go code", "feature flags for every launch",
         "morning meetings only", "Markdown over Google Docs", "detailed commit messages"]

TEMPLATES = [
    ("fact", "{system} for the {team} team times out after {num} {tunit} under peak load."),
    ("decision", "The {team} team decided to migrate {system} to {tool} {reason}."),
    ("preference", "{person} prefers {pref}."),
    ("observation", "{person} noticed that {system} drops requests {when}."),
    ("fact", "{customer} is on the enterprise plan and their renewal is handled by {person}."),
    ("decision", "We agreed to rotate the credentials for {system} {when}."),
    ("note", "{person} from {team} owns the runbook for {system}; ask them before changing it."),
    ("fact", "{customer} reported that exports from {system} were missing rows {when}."),
    ("decision", "{team} will stop using {tool} {reason}."),
    ("observation", "Error rates in {system} climb by {num} percent {when}."),
    ("note", "The on-call handbook says to page {person} if {system} is down for more than {num} {tunit}."),
    ("preference", "The {team} team prefers {pref} {reason}."),
    ("fact", "{system} keeps backups for {num} {tunit} and is restored from {tool} snapshots."),
    ("decision", "{person} approved moving {customer} onto {system} {reason}."),
    ("observation", "Since the last upgrade, {system} needs {num} {sunit} than before."),
    ("note", "{customer} asked {person} for a report on {system} {when}."),
]


def memories(n, seed=7):
    rng = random.Random(seed)
    seen, out, misses = set(), [], 0
    while len(out) < n:
        kind, tpl = rng.choice(TEMPLATES)
        text = tpl.format(
            person=rng.choice(PEOPLE), team=rng.choice(TEAMS), system=rng.choice(SYSTEMS),
            customer=rng.choice(CUSTOMERS), tool=rng.choice(TOOLS), reason=rng.choice(REASONS),
            when=rng.choice(WHEN), num=rng.choice(NUMS), tunit=rng.choice(TIME_UNITS), sunit=rng.choice(SIZE_UNITS), pref=rng.choice(PREFS))
        text = text[0].upper() + text[1:]
        if text in seen:
            # The templates hold a few hundred thousand sentences: past them (a run of misses),
            # a repeated one is made distinct by its number.
            misses += 1
            if misses < 64:
                continue
            text = f"{text} (#{len(out)})"
        misses = 0
        seen.add(text)
        out.append({"content": text, "kind": kind})
    return out


def call(url, token, tool, arguments):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": META}}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
        "authorization": f"Bearer {token}",
    })
    with urllib.request.urlopen(req, timeout=30) as resp:
        reply = json.load(resp)
    result = reply.get("result")
    if result is None or result.get("isError"):
        raise SystemExit(f"{tool} failed: {json.dumps(reply)[:500]}")
    return result["structuredContent"]


def main():
    url, token, queries = sys.argv[1], sys.argv[2], sys.argv[3].split("|")
    items = memories(int(sys.argv[4]) if len(sys.argv) > 4 else 1000)
    saved = 0
    for i in range(0, len(items), 100):
        ids = call(url, token, "save_memory", {"memories": items[i:i + 100], "wait_for_vectors": True})["ids"]
        saved += len(ids)
    print(f"seeded {saved} memories ({len({m['content'] for m in items})} distinct sentences)")
    for q in queries:
        hits = call(url, token, "search_memory", {"query": q})["results"]
        if not hits:
            raise SystemExit(f"query {q!r} found nothing")
        print(f"  query {q!r}: {len(hits)} results, top: {hits[0]['content']}")


if __name__ == "__main__":
    main()
