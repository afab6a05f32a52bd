# Sourced (`. scripts/localstack-session.sh`) from the repository's root by the scripts that need
# LocalStack for their whole run: starts it when none answers on LOCALSTACK_PORT (default 4566;
# installing it the first time), and stops it when the sourcing script exits if it started it.
# Sets `port`. It takes the script's EXIT trap.

port=${LOCALSTACK_PORT:-4566}
localstack_started=0
if ! scripts/localstack.sh status; then
  scripts/localstack.sh start
  localstack_started=1
fi
localstack_stop_if_started() {
  if [ "$localstack_started" = 1 ]; then
    scripts/localstack.sh stop
  fi
}
trap localstack_stop_if_started EXIT
