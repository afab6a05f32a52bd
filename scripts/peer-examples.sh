#!/usr/bin/env bash
# Runs ruststream-sqs-sns 0.7.1's examples on sqs-engine, as a user migrating would.
#
# The examples and their shared live module (tests/live/mod.rs) are read from the crate's source
# as cargo downloaded it (found through `cargo metadata`: the load test depends on the crate),
# copied into peer-examples/ (git-ignored), and migrated exactly as the README says:
#
#   ruststream_sqs_sns::prelude   ->  sqs_engine::prelude
#   ruststream_sqs_sns::X         ->  sqs_engine::ruststream::X
#
# Nothing else of them changes. Each example is built against sqs-engine and its tests run twice:
# in process (no endpoint: the live tests skip, as the crate designed them to), and live against
# LocalStack (SQS and SNS) with the crate's own switch RUSTSTREAM_REQUIRE_LIVE set, under which a
# live test that cannot reach its stack fails instead of skipping. Then the AsyncAPI comparison
# (peer-examples/tests/asyncapi_documents.rs) runs.
#
# One line per example, a summary, and exit 1 when an example does not build or a test fails
# (except where `expected` below names the example with the reason, which lies outside the
# broker). Starts LocalStack when none answers on LOCALSTACK_PORT (default 4566), and stops what
# it started.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

started_at=$SECONDS
port=${LOCALSTACK_PORT:-4566}
endpoint="http://127.0.0.1:$port"
suite="$root/peer-examples"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
logs="$CARGO_TARGET_DIR/peer-examples"
mkdir -p "$logs"

# Examples that cannot pass for a reason outside the broker: name -> the reason. None today.
declare -A expected=()

# The crate as cargo downloaded it, by the lock file's version.
peer=$(cargo metadata --locked --format-version 1 | python3 -c '
import json, os, sys
packages = json.load(sys.stdin)["packages"]
found = [p for p in packages if p["name"] == "ruststream-sqs-sns" and p["version"] == "0.7.1"]
if not found:
    sys.exit("ruststream-sqs-sns 0.7.1 is not in the lock file")
print(os.path.dirname(found[0]["manifest_path"]))
')
echo "peer-examples: ruststream-sqs-sns 0.7.1 from $peer"

# The sources, in the crate's own layout, so its #[path = "../tests/live/mod.rs"] resolve:
# copied to a staging directory and migrated there.
staging="$logs/staging"
rm -rf "$staging"
mkdir -p "$staging/tests/live"
cp -R "$peer/examples" "$staging/examples"
cp "$peer/tests/live/mod.rs" "$staging/tests/live/mod.rs"

# The README's migration, and nothing else.
find "$staging" -name '*.rs' -print0 |
  xargs -0 sed -i -e 's/ruststream_sqs_sns::prelude/sqs_engine::prelude/g' \
    -e 's/ruststream_sqs_sns::/sqs_engine::ruststream::/g'
if grep -rn 'ruststream_sqs_sns' "$staging"; then
  echo "peer-examples: a reference to ruststream_sqs_sns is left that the migration does not cover" >&2
  exit 1
fi

# Into peer-examples/, rewriting only the files whose text changed, so that cargo rebuilds an
# example only when its source (or sqs-engine) did.
python3 - "$staging" "$suite" <<'PY'
import os, shutil, sys
staging, suite = sys.argv[1:]
for part in ("examples", "tests/live"):
    source, target = os.path.join(staging, part), os.path.join(suite, part)
    wanted = set()
    for directory, _, files in os.walk(source):
        for name in files:
            relative = os.path.relpath(os.path.join(directory, name), source)
            wanted.add(relative)
            src, dst = os.path.join(source, relative), os.path.join(target, relative)
            with open(src, "rb") as f:
                text = f.read()
            if os.path.exists(dst):
                with open(dst, "rb") as f:
                    if f.read() == text:
                        continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
    for directory, _, files in os.walk(target):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.relpath(path, target) not in wanted:
                os.remove(path)
PY

# The manifest: the committed template, and the crate's example targets as its manifest lists
# them (a name, and the path of its source).
python3 - "$peer/Cargo.toml" "$suite/manifest.toml" "$suite/Cargo.toml" <<'PY'
import sys, tomllib
peer, template, out = sys.argv[1:]
with open(peer, "rb") as f:
    examples = tomllib.load(f).get("example", [])
with open(template) as f:
    text = f.read()
for example in examples:
    text += f'\n[[example]]\nname = "{example["name"]}"\npath = "{example["path"]}"\ntest = true\n'
try:
    with open(out) as f:
        unchanged = f.read() == text
except FileNotFoundError:
    unchanged = False
if not unchanged:
    with open(out, "w") as f:
        f.write(text)
PY
mapfile -t names < <(python3 -c '
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print("\n".join(e["name"] for e in tomllib.load(f).get("example", [])))
' "$peer/Cargo.toml")
echo "peer-examples: ${#names[@]} examples"

# LocalStack (SQS and SNS) for the live runs.
started=0
if ! LOCALSTACK_PORT=$port scripts/localstack.sh status; then
  LOCALSTACK_PORT=$port scripts/localstack.sh start
  started=1
fi
cleanup() {
  if [ "$started" = 1 ]; then
    LOCALSTACK_PORT=$port scripts/localstack.sh stop
  fi
}
trap cleanup EXIT

# Build every example's test binary; the executables by example name.
manifest=(--locked --manifest-path "$suite/Cargo.toml")
build_log="$logs/build.log"
declare -A binary=()
collect() {
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["example"] \
            and m["profile"]["test"] and m.get("executable"):
        print(m["target"]["name"], m["executable"])
'
}
build_started=$SECONDS
if cargo test "${manifest[@]}" --examples --no-run --message-format=json-render-diagnostics \
  2>"$build_log" | collect >"$logs/binaries"; then
  :
else
  # One failed: build them one at a time, so each example answers for itself.
  : >"$logs/binaries"
  for name in "${names[@]}"; do
    cargo test "${manifest[@]}" --example "$name" --no-run --message-format=json-render-diagnostics \
      2>"$logs/build-$name.log" | collect >>"$logs/binaries" || true
  done
fi
while read -r name exe; do
  binary[$name]=$exe
done <"$logs/binaries"
build_secs=$((SECONDS - build_started))

# Runs one test binary; prints "passed N" or "failed: <tests>".
run() {
  local log=$1
  shift
  if timeout 600 "$@" >"$log" 2>&1; then
    echo "passed $(grep -o '[0-9]* passed' "$log" | awk '{ s += $1 } END { print s + 0 }')"
  else
    local failed
    failed=$(grep -E '^test .* FAILED$' "$log" | awk '{ print $2 }' | paste -sd, -)
    echo "failed${failed:+: $failed}"
  fi
}

failures=0
unexpected=0
built=0
in_passed=0
live_passed=0
live_runs=0
printf '%-44s %-6s %-24s %s\n' example build "in process" live
for name in "${names[@]}"; do
  exe=${binary[$name]:-}
  src=$(python3 -c '
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print(next(e["path"] for e in tomllib.load(f)["example"] if e["name"] == sys.argv[2]))
' "$peer/Cargo.toml" "$name")
  if [ -z "$exe" ]; then
    status="build failed"
    line=$(printf '%-44s %-6s %-24s %s' "$name" no - -)
  else
    built=$((built + 1))
    in_process=$(cd "$suite" && run "$logs/$name.in-process.log" \
      env -u SQS_TEST_ENDPOINT -u RUSTSTREAM_REQUIRE_LIVE "$exe")
    [[ $in_process == passed* ]] && in_passed=$((in_passed + 1))
    if grep -q 'live::endpoint' "$suite/$src"; then
      live_runs=$((live_runs + 1))
      live=$(cd "$suite" && run "$logs/$name.live.log" \
        env SQS_TEST_ENDPOINT="$endpoint" RUSTSTREAM_REQUIRE_LIVE=1 "$exe")
      [[ $live == passed* ]] && live_passed=$((live_passed + 1))
    else
      live="- (no live tests)"
    fi
    status=ok
    if [[ $in_process != passed* ]] || [[ $live == failed* ]]; then
      status=failed
    fi
    line=$(printf '%-44s %-6s %-24s %s' "$name" yes "$in_process" "$live")
  fi
  if [ "$status" != ok ]; then
    failures=$((failures + 1))
    if [ -n "${expected[$name]:-}" ]; then
      line="$line   (expected: ${expected[$name]})"
    else
      unexpected=$((unexpected + 1))
      line="$line   <- logs in $logs"
    fi
  fi
  echo "$line"
done

# The AsyncAPI documents of one service on both brokers.
if cargo test "${manifest[@]}" --test asyncapi_documents >"$logs/asyncapi_documents.log" 2>&1; then
  comparison=passed
else
  comparison=failed
  unexpected=$((unexpected + 1))
fi

echo "== peer-examples: ${#names[@]} examples, $built built (build ${build_secs} s), $in_passed passed in process, $live_passed of $live_runs with live tests passed live, $failures failing ($unexpected unexpected); AsyncAPI comparison $comparison; $((SECONDS - started_at)) s in all"
[ "$unexpected" = 0 ]
