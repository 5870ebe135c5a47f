#!/usr/bin/env bash
# SDK dispatch throughput: lore's `entities.get` and `entities.list` through
# `POST /api/{org}/...` beside a bare rusqlite peer doing the same reads, in one run.
#
#   bash bench/sdk.sh
#
# Builds `lore` and the peer (`examples/rusqlite_peer.rs`) in release mode, makes a database with
# `lore init`, starts `lore serve` on it, seeds $ENTITIES `ticket` entities through the REST API
# (`entities.create_many`, 500 per call; `bench/sdk_seed.py`), samples 10,000 ids and 1,000 list
# cursors, starts the peer on the same database file, checks that lore and the peer answer the
# same JSON for the same requests, then drives each target with wrk (closed loop, $CONNS
# connections, $THREADS threads, `bench/sdk.lua`: random sampled id or cursor per request, the
# same sequence for every target) for $ROUNDS rounds of $DURATION s interleaved across targets,
# after one $WARMUP s warm-up each. Prints a table (per target, the median-throughput round among
# those not disturbed by other processes) and, per method, the peer/lore throughput ratio (median
# of the per-round ratios) against the <= 3x target and the ratio of server CPU per request
# (`bench/sdk_report.py`); everything lands in bench/out/sdk-<timestamp>/. Exits non-zero if any
# response was bad.
#
# Targets (every response is checked: status 200 and an id, or a next_cursor, in the body):
#   lore get / list         POST /api/bench/entities.get {"id"} and
#                           POST /api/bench/entities.list {"type":"ticket","limit":100,"cursor"},
#                           bearer owner token, default INFO request log (to a file), rate
#                           limits off (--rate-token-per-minute 0 --rate-org-per-minute 0)
#   rusqlite peer get/list  the same bodies to POST /get and /list of the peer
#   (extra) lore, RUST_LOG=warn: the same binary and database without the request log line
#
# wrk comes from Debian (the same pinned version as bench/run.sh). All traffic goes to 127.0.0.1.
#
# BENCH_SMOKE=1 (bench/lib.sh): no build (LORE_BIN, default the test command's debug lore-e2e,
# and PEER_BIN, default the debug rusqlite_peer example), 600 entities, one 1 s round after a
# 1 s warm-up per target, 8 connections, no wait for an idle machine; every response is still
# checked, and lore and the peer must still answer the same JSON.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"
if smoke; then
    DURATION=${DURATION:-1} WARMUP=${WARMUP:-1} ROUNDS=${ROUNDS:-1} CONNS=${CONNS:-8} ENTITIES=${ENTITIES:-600}
fi
DURATION=${DURATION:-10}   # seconds per measured round
WARMUP=${WARMUP:-5}        # seconds of warm-up per target, before the first round
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-32}
THREADS=${THREADS:-2}
ENTITIES=${ENTITIES:-100000}
KEEP_DB=${KEEP_DB:-0}      # 1: keep the seeded database and the binaries in the output directory
WRK_VERSION=4.1.0-3+b2     # Debian bookworm's wrk
ORG=bench
OUT=$BENCH_OUT_DIR/sdk-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

if [[ "$(dpkg-query -W -f='${Version}' wrk 2>/dev/null || true)" != "$WRK_VERSION" ]]; then
    log "installing wrk $WRK_VERSION (apt)"
    [[ $(id -u) == 0 ]] || die "wrk $WRK_VERSION is missing; run as root or: apt-get install wrk=$WRK_VERSION"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "wrk=$WRK_VERSION" >/dev/null
fi

if smoke; then
    LORE=$(smoke_lore)
    PEER=${PEER_BIN:-$(smoke_example rusqlite_peer)}
    log "$(smoke_note "lore servers run with rate limits off")"
else
    log "building lore and the rusqlite peer (release)"
    (cd "$ROOT" && cargo build --release --bin lore --example rusqlite_peer -q)
    # Copies, so that another build into the shared target dir cannot swap them mid-run.
    mkdir -p "$OUT/bin"
    cp "$CARGO_TARGET_DIR/release/lore" "$CARGO_TARGET_DIR/release/examples/rusqlite_peer" "$OUT/bin/"
    LORE=$OUT/bin/lore
    PEER=$OUT/bin/rusqlite_peer
fi

# --- servers -----------------------------------------------------------------------------------

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ $KEEP_DB != 1 ]]; then rm -rf "$OUT"/lore.db "$OUT"/lore.db-wal "$OUT"/lore.db-shm "$OUT/bin"; fi
    # lore's request log holds a line per request (about 400 MB a run).
    [[ -f $OUT/lore.log ]] && gzip -1f "$OUT/lore.log"
    true
}
trap cleanup EXIT

read -r LORE_PORT LORE_QUIET_PORT PEER_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
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
TOKEN=$("$LORE" init --db "$DB" --org "$ORG" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
# Rate limits off: the bench measures throughput, which the default per-token limit (600 a
# minute, on /api as on /mcp) would answer with 429s.
NO_LIMITS=(--rate-token-per-minute 0 --rate-org-per-minute 0)
log "lore servers run with rate limits off (${NO_LIMITS[*]})"
# Default logging (one INFO line per request on stderr), as `lore serve` ships.
RUST_LOG=${BENCH_LORE_RUST_LOG:-info} "$LORE" serve --addr "127.0.0.1:$LORE_PORT" --db "$DB" "${NO_LIMITS[@]}" 2>"$OUT/lore.log" &
LORE_PID=$!; PIDS+=("$LORE_PID")
wait_port "$LORE_PORT" lore "$OUT/lore.log"
LORE_BASE=http://127.0.0.1:$LORE_PORT

log "seeding lore with $ENTITIES ticket entities through POST /api/$ORG/entities.create_many"
python3 "$HERE/sdk_seed.py" seed "$LORE_BASE" "$ORG" "$TOKEN" "$ENTITIES" "$OUT"

# The peer and a quiet lore open the seeded file (each worker its own connection, WAL).
RUST_LOG=warn "$LORE" serve --addr "127.0.0.1:$LORE_QUIET_PORT" --db "$DB" "${NO_LIMITS[@]}" 2>"$OUT/lore-quiet.log" &
LORE_QUIET_PID=$!; PIDS+=("$LORE_QUIET_PID")
"$PEER" --db "$DB" --addr "127.0.0.1:$PEER_PORT" --org "$ORG" 2>"$OUT/peer.log" &
PEER_PID=$!; PIDS+=("$PEER_PID")
wait_port "$LORE_QUIET_PORT" "lore (RUST_LOG=warn)" "$OUT/lore-quiet.log"
wait_port "$PEER_PORT" "rusqlite peer" "$OUT/peer.log"
PEER_BASE=http://127.0.0.1:$PEER_PORT

log "checking that lore and the peer answer the same JSON"
python3 "$HERE/sdk_seed.py" check "$LORE_BASE" "$ORG" "$TOKEN" "$PEER_BASE" "$OUT"
python3 "$HERE/sdk_seed.py" check "http://127.0.0.1:$LORE_QUIET_PORT" "$ORG" "$TOKEN" "$PEER_BASE" "$OUT"

# key | url | headers | kind | sample | expected substring | server pid
JSON=$'content-type: application/json'
AUTH=$JSON$'\nauthorization: Bearer '"$TOKEN"
GET_EXPECT='"id":"ent_'
LIST_EXPECT='"next_cursor":"'
declare -A URL HDRS KIND SAMPLE EXPECT SPID
add_target() { URL[$1]=$2; HDRS[$1]=$3; KIND[$1]=$4; SAMPLE[$1]=$5; EXPECT[$1]=$6; SPID[$1]=$7; }
add_target lore-get "$LORE_BASE/api/$ORG/entities.get" "$AUTH" get "$OUT/ids.txt" "$GET_EXPECT" "$LORE_PID"
add_target lore-list "$LORE_BASE/api/$ORG/entities.list" "$AUTH" list "$OUT/cursors.txt" "$LIST_EXPECT" "$LORE_PID"
add_target peer-get "$PEER_BASE/get" "$JSON" get "$OUT/ids.txt" "$GET_EXPECT" "$PEER_PID"
add_target peer-list "$PEER_BASE/list" "$JSON" list "$OUT/cursors.txt" "$LIST_EXPECT" "$PEER_PID"
add_target lore-quiet-get "http://127.0.0.1:$LORE_QUIET_PORT/api/$ORG/entities.get" "$AUTH" get \
    "$OUT/ids.txt" "$GET_EXPECT" "$LORE_QUIET_PID"
add_target lore-quiet-list "http://127.0.0.1:$LORE_QUIET_PORT/api/$ORG/entities.list" "$AUTH" list \
    "$OUT/cursors.txt" "$LIST_EXPECT" "$LORE_QUIET_PID"
ORDER=(peer-get lore-get lore-quiet-get peer-list lore-list lore-quiet-list)

# --- load --------------------------------------------------------------------------------------

cpu_ticks() { # PID: user+system clock ticks of the process
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}
CLK_TCK=$(getconf CLK_TCK)

worker_ticks() { # PID: clock ticks of each *-worker-* thread, space-separated
    local t
    for t in /proc/"$1"/task/*; do
        [[ $(cat "$t/comm" 2>/dev/null) == *-worker-* ]] && awk '{ printf "%d ", $14 + $15 }' "$t/stat"
    done
    echo
}

run_wrk() { # KEY SECONDS OUTFILE
    local key=$1 before after wbefore wafter stat0 stat1 wrk_times
    before=$(cpu_ticks "${SPID[$key]}")
    wbefore=$(worker_ticks "${SPID[$key]}")
    stat0=$(head -1 /proc/stat)
    # `times` after wrk: the CPU time wrk itself used (user, system).
    wrk_times=$( {
        BENCH_HEADERS=${HDRS[$key]} BENCH_KIND=${KIND[$key]} BENCH_SAMPLE=${SAMPLE[$key]} \
            BENCH_EXPECT=${EXPECT[$key]} BENCH_OUT=$3 \
            wrk -t "$THREADS" -c "$CONNS" -d "${2}s" --timeout 10s -s "$HERE/sdk.lua" "${URL[$key]}" \
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
print(f"   round {r['round']} {sys.argv[1].rsplit('/', 1)[1].split('.')[0]:<16} {r['rps']:>9,.0f} req/s  "
      f"p50 {r['p50_us'] / 1000:6.2f} ms  p99 {r['p99_us'] / 1000:7.2f} ms  ok {r['good']}/{r['requests']}  "
      f"cpu server {r['server_cpu_pct']:.0f}% wrk {r['wrk_cpu_pct']:.0f}% other {r['other_cpu_pct']:.0f}%",
      file=sys.stderr)
EOF
    done
done

# --- report ------------------------------------------------------------------------------------

{
    smoke_note "lore servers run with rate limits off"
    echo "lore $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'), $($LORE --version 2>/dev/null || echo lore); peer: examples/rusqlite_peer.rs"
    echo "wrk $(dpkg-query -W -f='${Version}' wrk), $(rustc --version 2>/dev/null || echo rustc)"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); busy just before the run: ${BUSY_BEFORE}%"
    echo "data: $ENTITIES ticket entities in org $ORG; get: random of $(wc -l <"$OUT/ids.txt") sampled ids; list: pages of 100 after random of $(wc -l <"$OUT/cursors.txt") sampled cursors"
    echo "load: wrk $WRK_VERSION, $THREADS threads, $CONNS connections, ${WARMUP}s warm-up, $ROUNDS x ${DURATION}s rounds (median round shown)"
    echo
    set +e
    python3 "$HERE/sdk_report.py" "$OUT" "$ROUNDS"
    echo "exit=$?" >"$OUT/report.status"
} | tee "$OUT/results.md"
grep -q 'exit=0' "$OUT/report.status"
