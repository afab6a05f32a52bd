#!/usr/bin/env bash
# The load test's fill-and-consume against LocalStack: starts LocalStack when none answers
# (installing it the first time), fills a fresh queue with MESSAGES messages (default 20000),
# consumes them with the engine, and prints the report. Extra arguments go to `consume`
# (for example --workers 128 --json target/loadtest.json).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

messages=${1:-20000}
shift || true
. scripts/localstack-session.sh

endpoint="http://127.0.0.1:$port"
queue="loadtest-$(date +%s)-$$"
cargo build --release --locked -p loadtest
bin="${CARGO_TARGET_DIR:-target}/release/loadtest"
"$bin" fill --queue "$queue" --messages "$messages" --create --endpoint "$endpoint"
"$bin" consume --queue "$queue" --messages "$messages" --endpoint "$endpoint" "$@"
