#!/usr/bin/env bash
# Runs LocalStack (SQS, SNS and S3) as a plain Python process on loopback, without Docker.
#
#   scripts/localstack.sh install   create the cached venv from the lock file (if missing)
#   scripts/localstack.sh start     install if needed, start, wait until healthy
#   scripts/localstack.sh stop      stop the instance this script started, by its PID
#   scripts/localstack.sh status    exit 0 when an instance answers on the port
#
# Environment:
#   LOCALSTACK_PORT      port on 127.0.0.1 (default 4566)
#   SQS_ENGINE_CACHE     cache directory for the venv, pid and log files
#                        (default ~/.cache/sqs-engine)
#   LOCALSTACK_PYTHON    a Python >= 3.13 interpreter (default: the pyenv 3.13 build, then
#                        python3.13 / python3 on PATH when they are new enough)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lock="$here/localstack-requirements.lock"
port=${LOCALSTACK_PORT:-4566}
cache=${SQS_ENGINE_CACHE:-$HOME/.cache/sqs-engine}
lock_hash=$(sha256sum "$lock" | cut -c1-12)
venv="$cache/localstack-venv-$lock_hash"
pidfile="$cache/localstack-$port.pid"
logfile="$cache/localstack-$port.log"
health="http://127.0.0.1:$port/_localstack/health"

log() { echo "localstack.sh: $*" >&2; }

find_python() {
  local candidates=()
  [ -n "${LOCALSTACK_PYTHON:-}" ] && candidates+=("$LOCALSTACK_PYTHON")
  candidates+=(/root/.pyenv/versions/3.13.0/bin/python3 "$HOME/.pyenv/versions/3.13.0/bin/python3")
  command -v python3.13 >/dev/null 2>&1 && candidates+=("$(command -v python3.13)")
  command -v python3 >/dev/null 2>&1 && candidates+=("$(command -v python3)")
  for py in "${candidates[@]}"; do
    if [ -x "$py" ] && "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' 2>/dev/null; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

install() {
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
    return 0
  fi
  local py
  if ! py=$(find_python); then
    log "LocalStack needs Python 3.13 or newer; set LOCALSTACK_PYTHON to one"
    exit 1
  fi
  log "creating $venv with $py (first time only, about 1.5 minutes)"
  mkdir -p "$cache"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
  touch "$venv/.complete"
}

healthy() {
  curl -sf --max-time 2 "$health" >/dev/null 2>&1
}

start() {
  if healthy; then
    log "already answering on 127.0.0.1:$port"
    return 0
  fi
  install
  mkdir -p "$cache"
  log "starting on 127.0.0.1:$port (log: $logfile)"
  # A fresh data directory per start: no state carries over between runs.
  local data
  data=$(mktemp -d "${TMPDIR:-/tmp}/sqs-engine-localstack.XXXXXX")
  (
    cd "$data"
    SERVICES=sqs,sns,s3 GATEWAY_LISTEN="127.0.0.1:$port" LOCALSTACK_HOST="127.0.0.1:$port" \
      SQS_ENDPOINT_STRATEGY=path DNS_ADDRESS=0 EAGER_SERVICE_LOADING=1 \
      SKIP_SSL_CERT_DOWNLOAD=1 DISABLE_EVENTS=1 FILESYSTEM_ROOT="$data" \
      exec "$venv/bin/python" -m localstack.runtime.main
  ) >"$logfile" 2>&1 &
  echo $! >"$pidfile"
  local pid
  pid=$(cat "$pidfile")
  for _ in $(seq 1 120); do
    if healthy; then
      log "ready (pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      log "exited before it was ready; last lines of its log:"
      tail -n 30 "$logfile" >&2
      exit 1
    fi
    sleep 1
  done
  log "not healthy after 120 s; last lines of its log:"
  tail -n 30 "$logfile" >&2
  stop
  exit 1
}

stop() {
  if [ ! -f "$pidfile" ]; then
    log "no instance started by this script on port $port"
    return 0
  fi
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    log "stopped (pid $pid)"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) healthy ;;
  log) echo "$logfile" ;;
  *)
    echo "usage: $0 install|start|stop|status|log" >&2
    exit 2
    ;;
esac
