#!/usr/bin/env bash
# Runs the whole test suite: unit tests, and the integration tests against LocalStack (a real
# SQS implementation). Starts LocalStack first when none answers (installing it the first
# time), and stops what it started. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The dashboards test runs a real Prometheus: Debian's package, installed when missing.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing Debian's prometheus package" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "test.sh: prometheus and promtool are needed (Debian package prometheus); the dashboards test will fail without them" >&2
  fi
fi

# The large-payload tests talk to AWS's Python extended client, in a venv of its own.
scripts/extended-client.sh install

. scripts/localstack-session.sh

export SQS_ENGINE_TEST_ENDPOINT="http://127.0.0.1:$port"
SQS_ENGINE_LOCALSTACK_LOG=$(scripts/localstack.sh log)
export SQS_ENGINE_LOCALSTACK_LOG
# --no-fail-fast: one failing test binary does not hide the results of the others.
cargo test --workspace --locked --no-fail-fast "$@"
