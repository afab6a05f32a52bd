#!/usr/bin/env bash
# What the engine does to an SQS that cannot keep up: the embedded server overloaded
# (`loadtest serve --overload SLOTS,MICROS`: SQS calls served at once, and the microseconds each
# message held adds to a call; a call whose client gave up is still applied), filled with
# MESSAGES messages, consumed by `loadtest consume` with the engine's default receivers and with
# each fixed count in RECEIVERS, a fresh server each. Prints the seconds each took, its SQS calls,
# and the default's time over the best fixed count's.
#
#   scripts/overload.sh [SLOTS,MICROS] [MESSAGES] [RECEIVERS]     (defaults: 1,50 2000 "1 2 4 8 16")
#
# Builds the load test in release first. The embedded server is a benchmark target, not
# evidence of correctness; see docs/benchmarks.md, "An overloaded server".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

overload=${1:-1,50}
messages=${2:-2000}
counts=${3:-1 2 4 8 16}
cargo build --release --locked -p loadtest >&2
loadtest="${CARGO_TARGET_DIR:-target}/release/loadtest"
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# One run: a fresh overloaded server, MESSAGES messages, one consume; prints "seconds calls".
# Runs in this shell (not a subshell), so that the exit trap stops the server of a run that
# fails.
run() {
  local receivers=$1
  "$loadtest" serve --overload "$overload" >"$work/endpoint" 2>"$work/serve.log" &
  server=$!
  local endpoint=""
  for _ in $(seq 100); do
    endpoint=$(head -1 "$work/endpoint" 2>/dev/null || true)
    [ -n "$endpoint" ] && break
    sleep 0.1
  done
  [ -n "$endpoint" ] || { echo "the server did not start: $(cat "$work/serve.log")" >&2; exit 1; }
  "$loadtest" fill --endpoint "$endpoint" --queue overload --messages "$messages" --create >/dev/null
  local flag=()
  [ "$receivers" = default ] || flag=(--receivers "$receivers")
  "$loadtest" consume --endpoint "$endpoint" --queue overload --messages "$messages" \
    --timeout-secs 900 --json "$work/consume.json" "${flag[@]}" >/dev/null
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %d" % (r["elapsed_secs"], r["calls"]["total"]))' "$work/consume.json"
}

echo "overloaded server ($overload), $messages messages"
printf '%-10s %10s %8s\n' receivers seconds calls
best=""
for receivers in default $counts; do
  run "$receivers" >"$work/result"
  read -r seconds calls <"$work/result"
  printf '%-10s %10s %8s\n' "$receivers" "$seconds" "$calls"
  if [ "$receivers" = default ]; then
    default=$seconds
  elif [ -z "$best" ] || python3 -c "import sys; sys.exit(not $seconds < $best)"; then
    best=$seconds
  fi
done
python3 -c "print(f'default / best fixed: {$default / $best:.2f}')"
