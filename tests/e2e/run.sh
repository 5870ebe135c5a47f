#!/usr/bin/env bash
# End-to-end tests: the real `lore serve` driven by real, unmodified MCP clients
# (@modelcontextprotocol/sdk 1.32.2, @modelcontextprotocol/client 2.4.0, Python mcp 2.3.0).
#
# Installs what it needs, then runs `node --test` over tests/e2e/*.test.mjs:
#   - npm packages: `npm ci` into tests/e2e/node_modules (git-ignored), from package-lock.json;
#   - Python: a venv at $TOOLS/venv with requirements.txt.
# Both installs are skipped when already satisfied.
#
# Environment:
#   LORE_TARGET native (default) or worker: see below.
#   LORE_BIN   the lore binary to test. Default: build it (default features) and test a copy,
#              so a concurrent build with other features cannot swap it mid-run.
#   TOOLS      where tools are installed (default <repo>/.tools).
#   LORE_PY    the Python with mcp==2.3.0 (default $TOOLS/venv/bin/python).
#   NODE       the node binary (default: node on PATH; Node >= 20).
#   LORE_CHROMIUM     the Chromium the OAuth tests drive (default /usr/bin/chromium, installed
#                     with apt-get when missing).
#   LORE_OAUTH_SHOTS  a directory for screenshots of the sign-in and consent pages (optional).
#   LORE_E2E_INSTALL_ONLY  install the packages and Chromium, then exit.
# Extra arguments are passed to `node --test` (e.g. --test-name-pattern=isolation).
set -euo pipefail

E2E=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E/../.." && pwd)
export TOOLS=${TOOLS:-$REPO/.tools}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/lore-target}
NODE=${NODE:-node}

log() { printf '[e2e] %s\n' "$*" >&2; }

node_major=$("$NODE" -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  log "Node >= 20 is required (found $("$NODE" --version))"
  exit 1
fi

# npm packages, pinned by package-lock.json. Reinstall only when the lock changed.
if ! cmp -s "$E2E/package-lock.json" "$E2E/node_modules/.e2e-installed-lock.json" 2>/dev/null; then
  log "npm ci (tests/e2e)"
  npm ci --prefix "$E2E" --no-audit --no-fund --loglevel=error >&2
  cp "$E2E/package-lock.json" "$E2E/node_modules/.e2e-installed-lock.json"
fi

# Python venv with mcp==2.3.0.
export LORE_PY=${LORE_PY:-$TOOLS/venv/bin/python}
if [ ! -x "$LORE_PY" ]; then
  log "creating venv $TOOLS/venv"
  mkdir -p "$TOOLS"
  python3 -m venv "$TOOLS/venv"
  LORE_PY=$TOOLS/venv/bin/python
fi
if ! "$LORE_PY" - "$E2E/requirements.txt" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, _, want = line.partition("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
PY
then
  log "pip install -r requirements.txt"
  "$LORE_PY" -m pip install --quiet --disable-pip-version-check -r "$E2E/requirements.txt" >&2
fi

# Headless Chromium for the OAuth tests (lore's sign-in and consent pages in a real browser),
# from Debian's packages; driven by playwright-core from package-lock.json.
if [ "${LORE_TARGET:-native}" = native ] && [ ! -x "${LORE_CHROMIUM:-/usr/bin/chromium}" ]; then
  log "apt-get install chromium"
  if [ "$(id -u)" -eq 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
  else
    (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
  fi
fi

# LORE_E2E_INSTALL_ONLY=1: only install (the test command does it while it compiles).
if [ -n "${LORE_E2E_INSTALL_ONLY:-}" ]; then
  exit 0
fi

# What is under test: `lore serve` (LORE_TARGET=native, the default) or the Workers build under
# workerd (LORE_TARGET=worker; see lib/worker.mjs: it needs the build in LORE_WORKER_BUILD,
# default build/, and WORKER_NODE_MODULES and WORKER_NODE from scripts/worker-tools).
export LORE_TARGET=${LORE_TARGET:-native}
# LORE_TARGET=spin: the Spin component in the wasmtime dev host (lib/spin.mjs; scripts/build-spin
# builds both).
if [ "$LORE_TARGET" = spin ]; then
  log "LORE_TARGET=spin"
  cd "$E2E"
  exec "$NODE" --test --test-force-exit --test-timeout=120000 "$@" ./*.test.mjs
fi
if [ "$LORE_TARGET" = worker ]; then
  log "LORE_TARGET=worker LORE_WORKER_BUILD=${LORE_WORKER_BUILD:-build}"
  cd "$E2E"
  exec "$NODE" --test --test-force-exit --test-timeout=120000 "$@" ./*.test.mjs
fi
if [ -z "${LORE_BIN:-}" ]; then
  log "cargo build --bin lore"
  (cd "$REPO" && cargo build --quiet --bin lore)
  mkdir -p "$TOOLS/e2e"
  cp "$CARGO_TARGET_DIR/debug/lore" "$TOOLS/e2e/lore"
  export LORE_BIN=$TOOLS/e2e/lore
fi
export LORE_BIN
log "LORE_BIN=$LORE_BIN"

cd "$E2E"
# Every `lore serve` of the run logs JSON into LORE_E2E_LOGS, and the harness notes there each
# secret the tests were given; afterwards check_logs.mjs fails the run if any log line holds
# one (tokens, connection and webhook secrets, passwords, script source markers).
export LORE_E2E_LOGS=${LORE_E2E_LOGS:-$(mktemp -d)}
: > "$LORE_E2E_LOGS/secrets.txt"
# Files run in parallel processes, each with its own servers on OS-chosen loopback ports.
status=0
"$NODE" --test --test-force-exit --test-timeout=120000 "$@" ./*.test.mjs || status=$?
"$NODE" ./check_logs.mjs "$LORE_E2E_LOGS" || status=$?
exit "$status"
