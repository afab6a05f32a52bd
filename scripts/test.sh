#!/usr/bin/env bash
# Runs the whole test suite: unit tests, and the integration tests against LocalStack (a real
# SQS implementation). Starts LocalStack first when none answers (installing it the first
# time), and stops what it started. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

port=${LOCALSTACK_PORT:-4566}
started=0
if ! scripts/localstack.sh status; then
  scripts/localstack.sh start
  started=1
fi
cleanup() {
  if [ "$started" = 1 ]; then
    scripts/localstack.sh stop
  fi
}
trap cleanup EXIT

export SQS_ENGINE_TEST_ENDPOINT="http://127.0.0.1:$port"
SQS_ENGINE_LOCALSTACK_LOG=$(scripts/localstack.sh log)
export SQS_ENGINE_LOCALSTACK_LOG
cargo test --workspace --locked "$@"
