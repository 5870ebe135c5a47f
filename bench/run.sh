#!/usr/bin/env bash
# Throughput and latency of lore beside two reference MCP servers, in one run.
#
#   bash bench/run.sh
#
# Installs its pinned tools into $TOOLS (default: ~/.cache/lore-tools, outside the clone), builds
# `lore` in release mode, starts the servers on free loopback ports, seeds lore with 1,000
# memories, checks that every target answers real successes, then drives each with wrk (closed
# loop, $CONNS connections, $THREADS threads) for $DURATION s per round, $ROUNDS rounds interleaved
# across targets after one $WARMUP s warm-up each. Prints a table (per target, the median-throughput
# round among those not disturbed by other processes) and the lore/peer ratios and target verdicts;
# everything lands in bench/out/<timestamp>/. Exits non-zero if any response was bad.
#
# Targets (every response body is checked during the runs, not only before them):
#   lore tools/list, lore search_memory  stateless 2026-07-28 requests, bearer token
#   server-everything tools/list         its streamableHttp mode; one session, reused
#   python mcp tools/list                stateless 2026-07-28 requests (JSON-response mode)
# and extra rows: the Python peer in 2 uvicorn workers, lore with RUST_LOG=warn, and with
# LORE_BASELINE_BIN=<another lore binary> the same two lore requests against that binary (an
# earlier build, to compare two versions of lore side by side in one run). LORE_BIN=<binary>:
# measure that build instead of building one.
#
# Every lore server runs with its rate limits off (`--rate-token-per-minute 0
# --rate-org-per-minute 0`): the bench measures throughput, which a per-token limit of 600 a
# minute would answer with 429s.
#
# All traffic goes to 127.0.0.1, and every wrk run stops by itself after its duration.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e),
# 100 memories, one 1 s round after a 1 s warm-up per target, 8 connections, no wait for an idle
# machine; every response is still checked.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
TOOLS=${TOOLS:-$HOME/.cache/lore-tools}
if smoke; then
    DURATION=${DURATION:-1} WARMUP=${WARMUP:-1} ROUNDS=${ROUNDS:-1} CONNS=${CONNS:-8} SEED_N=${SEED_N:-100}
fi
DURATION=${DURATION:-10}   # seconds per measured round
WARMUP=${WARMUP:-5}        # seconds of warm-up per target, before the first round
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
SEED_N=${SEED_N:-1000}     # memories seeded into lore
WRK_VERSION=4.1.0-3+b2     # Debian bookworm's wrk
OUT=$BENCH_OUT_DIR/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT" "$TOOLS"

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# --- pinned tools ------------------------------------------------------------------------------

if [[ "$(dpkg-query -W -f='${Version}' wrk 2>/dev/null || true)" != "$WRK_VERSION" ]]; then
    log "installing wrk $WRK_VERSION (apt)"
    [[ $(id -u) == 0 ]] || die "wrk $WRK_VERSION is missing; run as root or: apt-get install wrk=$WRK_VERSION"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "wrk=$WRK_VERSION" >/dev/null
fi

NODE_DIR=$TOOLS/bench-node
lock_sum=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
if [[ "$(cat "$NODE_DIR/.stamp" 2>/dev/null || true)" != "$lock_sum" ]]; then
    log "installing @modelcontextprotocol/server-everything (npm ci, pinned by bench/package-lock.json)"
    rm -rf "$NODE_DIR" && mkdir -p "$NODE_DIR"
    cp "$HERE/package.json" "$HERE/package-lock.json" "$NODE_DIR/"
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$lock_sum" >"$NODE_DIR/.stamp"
fi
EVERYTHING_JS=$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js

VENV=$TOOLS/bench-venv
req_sum=$(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)
if [[ "$(cat "$VENV/.stamp" 2>/dev/null || true)" != "$req_sum" ]]; then
    log "installing mcp==2.3.0 and uvicorn into $VENV (pip, pinned by bench/requirements.txt)"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$HERE/requirements.txt"
    echo "$req_sum" >"$VENV/.stamp"
fi

if smoke; then
    LORE=$(smoke_lore)
    log "$(smoke_note "lore servers run with rate limits off")"
elif [[ -n ${LORE_BIN:-} ]]; then
    LORE=$LORE_BIN
else
    log "building lore (release)"
    (cd "$ROOT" && cargo build --release --bin lore -q)
    LORE=$CARGO_TARGET_DIR/release/lore
fi

# --- servers -----------------------------------------------------------------------------------

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

read -r LORE_PORT LORE_QUIET_PORT EVERYTHING_PORT PY_PORT PY2_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)

wait_port() { # PORT NAME LOG
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    cat "$3" >&2 || true
    die "$2 did not start listening on 127.0.0.1:$1"
}

DB=$OUT/lore.db
TOKEN=$("$LORE" init --db "$DB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
NO_LIMITS=(--rate-token-per-minute 0 --rate-org-per-minute 0)
log "lore servers run with rate limits off (${NO_LIMITS[*]})"
# Default logging (one INFO line per request on stderr), as `lore serve` ships.
RUST_LOG=${BENCH_LORE_RUST_LOG:-info} "$LORE" serve --addr "127.0.0.1:$LORE_PORT" --db "$DB" "${NO_LIMITS[@]}" 2>"$OUT/lore.log" &
LORE_PID=$!; PIDS+=("$LORE_PID")
# The same binary and database with its per-request INFO line filtered out (RUST_LOG=warn): a
# supplementary pair of rows showing what that synchronous log write costs.
RUST_LOG=warn "$LORE" serve --addr "127.0.0.1:$LORE_QUIET_PORT" --db "$DB" "${NO_LIMITS[@]}" 2>"$OUT/lore-quiet.log" &
LORE_QUIET_PID=$!; PIDS+=("$LORE_QUIET_PID")
# server-everything prints a line on stdout for every request: that goes to /dev/null.
PORT=$EVERYTHING_PORT node "$EVERYTHING_JS" streamableHttp >/dev/null 2>"$OUT/everything.log" &
EVERYTHING_PID=$!; PIDS+=("$EVERYTHING_PID")
"$VENV/bin/python" "$HERE/py_server.py" "$PY_PORT" 1 >"$OUT/python.log" 2>&1 &
PY_PID=$!; PIDS+=("$PY_PID")
# The same app in two uvicorn worker processes, one per core like lore's worker threads: an extra
# row, since the peer is stateless and scales out that way.
"$VENV/bin/python" "$HERE/py_server.py" "$PY2_PORT" 2 >"$OUT/python2.log" 2>&1 &
PY2_PID=$!; PIDS+=("$PY2_PID")
wait_port "$LORE_PORT" lore "$OUT/lore.log"
wait_port "$LORE_QUIET_PORT" "lore (RUST_LOG=warn)" "$OUT/lore-quiet.log"
wait_port "$EVERYTHING_PORT" server-everything "$OUT/everything.log"
wait_port "$PY_PORT" "python mcp" "$OUT/python.log"
wait_port "$PY2_PORT" "python mcp (2 workers)" "$OUT/python2.log"

LORE_URL=http://127.0.0.1:$LORE_PORT/mcp
LORE_QUIET_URL=http://127.0.0.1:$LORE_QUIET_PORT/mcp
EVERYTHING_URL=http://127.0.0.1:$EVERYTHING_PORT/mcp
PY_URL=http://127.0.0.1:$PY_PORT/mcp
PY2_URL=http://127.0.0.1:$PY2_PORT/mcp

# --- requests ----------------------------------------------------------------------------------

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
COMMON=$'content-type: application/json\naccept: application/json, text/event-stream'
STATELESS=$COMMON$'\nmcp-protocol-version: 2026-07-28'
LIST_BODY='{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{'"$META"'}}'
SEARCH_BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_memory","arguments":{"query":"%QUERY%"},'"$META"'}}'
QUERIES='stripe integration timeout|postgres backups|who owns the kafka runbook|billing team decided to migrate|rotate credentials|Acme renewal|dark mode|latency regressed after the upgrade'
LIST_EXPECT='"tools":['
SEARCH_EXPECT='"structuredContent":{"results":[{'   # a non-empty result list

# POSTs once with curl; prints the HTTP status, leaves the body in $OUT/$name.preflight.
post() { # NAME URL HEADERS BODY
    local args=() line
    while IFS= read -r line; do [[ -n $line ]] && args+=(-H "$line"); done <<<"$3"
    curl -sS -o "$OUT/$1.preflight" -w '%{http_code}' "${args[@]}" --data-binary "$4" "$2"
}

log "seeding lore with $SEED_N memories"
python3 "$HERE/seed.py" "$LORE_URL" "$TOKEN" "$QUERIES" "$SEED_N" | tee "$OUT/seed.txt" >&2

if [[ -n ${LORE_BASELINE_BIN:-} ]]; then
    [[ -x $LORE_BASELINE_BIN ]] || die "LORE_BASELINE_BIN=$LORE_BASELINE_BIN is not an executable"
    # Its own copy of the seeded database (the same schema), so the two never contend.
    sqlite_copy=$OUT/baseline.db
    "$LORE" backup --db "$DB" "$sqlite_copy" --force >/dev/null
    BASE_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    RUST_LOG=${BENCH_LORE_RUST_LOG:-info} "$LORE_BASELINE_BIN" serve --addr "127.0.0.1:$BASE_PORT" --db "$sqlite_copy" "${NO_LIMITS[@]}" 2>"$OUT/baseline.log" &
    BASE_PID=$!; PIDS+=("$BASE_PID")
    wait_port "$BASE_PORT" "lore baseline" "$OUT/baseline.log"
    BASE_URL=http://127.0.0.1:$BASE_PORT/mcp
    log "baseline: $("$LORE_BASELINE_BIN" --version 2>/dev/null || echo "$LORE_BASELINE_BIN") on a copy of the seeded database"
fi

log "opening one server-everything session"
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lore-bench","version":"1"}}}'
curl -sS -D "$OUT/everything.init.headers" -o "$OUT/everything.init.body" \
    -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
    --data-binary "$INIT" "$EVERYTHING_URL"
SESSION=$(awk 'tolower($1) == "mcp-session-id:" { print $2 }' "$OUT/everything.init.headers" | tr -d '\r')
[[ -n $SESSION ]] || die "server-everything returned no mcp-session-id: $(head -c 500 "$OUT/everything.init.body")"
EVERYTHING_HEADERS=$COMMON$'\nmcp-protocol-version: 2025-11-25\nmcp-session-id: '"$SESSION"
status=$(post everything-initialized "$EVERYTHING_URL" "$EVERYTHING_HEADERS" '{"jsonrpc":"2.0","method":"notifications/initialized"}')
[[ $status == 202 ]] || die "server-everything notifications/initialized: HTTP $status"

# key | url | headers | body | expected substring | queries | server pid
declare -A URL HDRS BODY EXPECT QRY SPID
add_target() { URL[$1]=$2; HDRS[$1]=$3; BODY[$1]=$4; EXPECT[$1]=$5; QRY[$1]=$6; SPID[$1]=$7; }
add_target lore-tools-list "$LORE_URL" "$STATELESS"$'\nmcp-method: tools/list\nauthorization: Bearer '"$TOKEN" \
    "$LIST_BODY" "$LIST_EXPECT" "" "$LORE_PID"
add_target lore-search "$LORE_URL" "$STATELESS"$'\nmcp-method: tools/call\nmcp-name: search_memory\nauthorization: Bearer '"$TOKEN" \
    "$SEARCH_BODY" "$SEARCH_EXPECT" "$QUERIES" "$LORE_PID"
add_target everything-tools-list "$EVERYTHING_URL" "$EVERYTHING_HEADERS" \
    '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' "$LIST_EXPECT" "" "$EVERYTHING_PID"
add_target python-tools-list "$PY_URL" "$STATELESS"$'\nmcp-method: tools/list' \
    "$LIST_BODY" "$LIST_EXPECT" "" "$PY_PID"
add_target lore-quiet-tools-list "$LORE_QUIET_URL" "${HDRS[lore-tools-list]}" "$LIST_BODY" "$LIST_EXPECT" "" "$LORE_QUIET_PID"
add_target lore-quiet-search "$LORE_QUIET_URL" "${HDRS[lore-search]}" "$SEARCH_BODY" "$SEARCH_EXPECT" "$QUERIES" "$LORE_QUIET_PID"
add_target python2-tools-list "$PY2_URL" "${HDRS[python-tools-list]}" "$LIST_BODY" "$LIST_EXPECT" "" "$PY2_PID"
ORDER=(everything-tools-list python-tools-list python2-tools-list lore-tools-list lore-search
       lore-quiet-tools-list lore-quiet-search)
if [[ -n ${LORE_BASELINE_BIN:-} ]]; then
    add_target baseline-tools-list "$BASE_URL" "${HDRS[lore-tools-list]}" "$LIST_BODY" "$LIST_EXPECT" "" "$BASE_PID"
    add_target baseline-search "$BASE_URL" "${HDRS[lore-search]}" "$SEARCH_BODY" "$SEARCH_EXPECT" "$QUERIES" "$BASE_PID"
    ORDER+=(baseline-tools-list baseline-search)
fi

log "checking every target answers 200 with a real result"
for key in "${ORDER[@]}"; do
    body=${BODY[$key]//%QUERY%/postgres backups}
    status=$(post "$key" "${URL[$key]}" "${HDRS[$key]}" "$body")
    if [[ $status != 200 ]] || ! grep -qF "${EXPECT[$key]}" "$OUT/$key.preflight"; then
        die "$key: HTTP $status, body: $(head -c 500 "$OUT/$key.preflight")"
    fi
    printf '   %-22s HTTP %s, %6d-byte response\n' "$key" "$status" "$(wc -c <"$OUT/$key.preflight")" >&2
done

# --- load --------------------------------------------------------------------------------------

cpu_ticks() { # PID: user+system clock ticks of the process and its children (uvicorn workers)
    local pid total=0 t
    for pid in "$1" $(pgrep -P "$1" || true); do
        t=$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)

worker_ticks() { # PID: clock ticks of each lore-worker-* thread, space-separated
    local t
    for t in /proc/"$1"/task/*; do
        [[ $(cat "$t/comm" 2>/dev/null) == lore-worker-* ]] && awk '{ printf "%d ", $14 + $15 }' "$t/stat"
    done
    echo
}

run_wrk() { # KEY SECONDS OUTFILE
    local key=$1 before after wbefore wafter
    local stat0 stat1 wrk_times
    before=$(cpu_ticks "${SPID[$key]}")
    wbefore=$(worker_ticks "${SPID[$key]}")
    stat0=$(head -1 /proc/stat)
    # `times` after wrk: the CPU time wrk itself used (user, system).
    wrk_times=$( {
        BENCH_HEADERS=${HDRS[$key]} BENCH_BODY=${BODY[$key]} BENCH_EXPECT=${EXPECT[$key]} \
            BENCH_QUERIES=${QRY[$key]} BENCH_OUT=$3 \
            wrk -t "$THREADS" -c "$CONNS" -d "${2}s" --timeout 10s -s "$HERE/mcp.lua" "${URL[$key]}" \
            >"${3%.json}.wrk.txt"
        times
    } | tail -1 )
    stat1=$(head -1 /proc/stat)
    after=$(cpu_ticks "${SPID[$key]}")
    wafter=$(worker_ticks "${SPID[$key]}")
    python3 - "$3" "$((after - before))" "$CLK_TCK" "$2" "$wbefore" "$wafter" "$stat0" "$stat1" "$wrk_times" <<'EOF'
import json, re, sys
path, ticks, hz, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
r = json.load(open(path))
r["server_cpu_pct"] = 100.0 * ticks / hz / secs
# Everything else the machine did meanwhile (other processes, steal): busy CPU time of all cores
# less the server's and wrk's. Rounds with much of it are marked noisy in the report.
def busy(line):
    f = [int(x) for x in line.split()[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(f) - f[3] - f[4]
wrk_s = sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", sys.argv[9]))
r["wrk_cpu_pct"] = 100.0 * wrk_s / secs
r["other_cpu_pct"] = max(0.0, 100.0 * ((busy(sys.argv[8]) - busy(sys.argv[7])) / hz - ticks / hz - wrk_s) / secs)
before, after = sys.argv[5].split(), sys.argv[6].split()
if before and len(before) == len(after):
    # CPU share of each lore worker thread: shows how connections were spread over workers.
    r["worker_cpu_pct"] = [100.0 * (int(a) - int(b)) / hz / secs for a, b in zip(after, before)]
json.dump(r, open(path, "w"))
EOF
}

log "load: $CONNS connections, $THREADS wrk threads, ${WARMUP}s warm-up, $ROUNDS x ${DURATION}s per target"
log "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); wrk shares them with the server under test"
busy_pct() { # share of all cores busy over the next 2 seconds
    local a b
    a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
    local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) )) total=0 i
    for i in 1 2 3 4 5 6 7 8; do total=$(( total + b[i] - a[i] )); done
    echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}
BUSY_BEFORE=$(busy_pct)
for _ in $(seq 30); do  # wait up to about a minute for other work to finish (not in a smoke run)
    smoke && break
    (( BUSY_BEFORE > 10 )) || break
    log "machine ${BUSY_BEFORE}% busy with other work; waiting for it to settle"
    BUSY_BEFORE=$(busy_pct)
done
if (( BUSY_BEFORE > 10 )); then
    log "WARNING: the machine was ${BUSY_BEFORE}% busy just before the run: other work skews the numbers"
fi
for key in "${ORDER[@]}"; do
    run_wrk "$key" "$WARMUP" "$OUT/$key.warmup.json"
done
for round in $(seq "$ROUNDS"); do
    for key in "${ORDER[@]}"; do
        f=$OUT/$key.r$round.json
        run_wrk "$key" "$DURATION" "$f"
        python3 - "$f" "$round" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); r["round"] = int(sys.argv[2]); json.dump(r, open(sys.argv[1], "w"))
print(f"   round {r['round']} {sys.argv[1].rsplit('/', 1)[1].split('.')[0]:<22} {r['rps']:>9,.0f} req/s  "
      f"p50 {r['p50_us'] / 1000:6.2f} ms  p99 {r['p99_us'] / 1000:7.2f} ms  ok {r['good']}/{r['requests']}  "
      f"cpu server {r['server_cpu_pct']:.0f}% wrk {r['wrk_cpu_pct']:.0f}% other {r['other_cpu_pct']:.0f}%",
      file=sys.stderr)
EOF
    done
done

# --- report ------------------------------------------------------------------------------------

{
    smoke_note "lore servers run with rate limits off"
    echo "lore $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'), $($LORE --version 2>/dev/null || echo lore)"
    echo "wrk $(dpkg-query -W -f='${Version}' wrk), node $(node --version), $(python3 --version)"
    echo "server-everything $(node -p "require('$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/package.json').version"), @modelcontextprotocol/sdk $(node -p "require('$NODE_DIR/node_modules/@modelcontextprotocol/sdk/package.json').version")"
    echo "python peer: $("$VENV/bin/python" --version), $("$VENV/bin/pip" freeze 2>/dev/null | grep -E '^(mcp|uvicorn|uvloop|httptools|starlette)==' | tr '\n' ' ')"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); busy just before the run: ${BUSY_BEFORE}%"
    echo "python peer: 1 uvicorn process (extra row: 2 worker processes); lore: one worker thread per core"
    echo "load: wrk $WRK_VERSION, $THREADS threads, $CONNS connections, ${WARMUP}s warm-up, $ROUNDS x ${DURATION}s rounds (median round shown)"
    echo
    set +e
    SEED_N=$SEED_N python3 "$HERE/report.py" "$OUT" "$ROUNDS"
    echo "exit=$?" >"$OUT/report.status"
} | tee "$OUT/results.md"
grep -q 'exit=0' "$OUT/report.status"
