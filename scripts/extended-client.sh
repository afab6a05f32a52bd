#!/usr/bin/env bash
# AWS's Python extended client (PyPI's amazon-sqs-extended-client) in a cached venv: the other
# side of the large-payload tests, which sends bodies through S3 for sqs-engine to receive and
# receives what sqs-engine sent.
#
#   scripts/extended-client.sh install   create the venv from the lock file (if missing)
#   scripts/extended-client.sh python    install if needed, then print the venv's python
#
# Environment:
#   SQS_ENGINE_CACHE   cache directory for the venv (default ~/.cache/sqs-engine)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lock="$here/extended-client-requirements.lock"
cache=${SQS_ENGINE_CACHE:-$HOME/.cache/sqs-engine}
venv="$cache/extended-client-venv-$(sha256sum "$lock" | cut -c1-12)"

install() {
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
    return 0
  fi
  # The tests run in parallel and each asks for the venv: one makes it while the others wait
  # (the lock goes with this process), then they find it complete.
  mkdir -p "$cache"
  exec 9>"$venv.lock"
  flock 9
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
    return 0
  fi
  echo "extended-client.sh: creating $venv (first time only)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
  touch "$venv/.complete"
}

case "${1:-}" in
  install) install ;;
  python) install && echo "$venv/bin/python" ;;
  *) echo "usage: $0 install|python" >&2; exit 2 ;;
esac
