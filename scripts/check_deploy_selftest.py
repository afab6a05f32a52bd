"""Shows that scripts/check_deploy.py's cross-file checks can fail: runs them on modified copies
of deploy/kubernetes and expects the findings. Run by scripts/check-deploy.sh in its venv after
the check itself; exits 1 when a check passes what it must refuse, or refuses what it must pass.
"""

import copy
import math
import sys

import yaml

import check_deploy

KUBERNETES = check_deploy.DEPLOY / "kubernetes"


def documents():
    loaded = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        loaded.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None)
    return loaded


def of_kind(docs, kind):
    return next(doc for doc in docs if doc.get("kind") == kind)


def pod_spec(docs):
    return of_kind(docs, "Deployment")["spec"]["template"]["spec"]


def env_var(docs, name, value):
    for var in pod_spec(docs)["containers"][0]["env"]:
        if var["name"] == name:
            var["value"] = value


def trigger(docs, kind):
    return next(t for t in of_kind(docs, "ScaledObject")["spec"]["triggers"] if t["type"] == kind)


def grace_findings(docs):
    findings = []
    deployment = of_kind(docs, "Deployment")
    budget = check_deploy.shutdown_budget(check_deploy.container_env(deployment))
    check_deploy.check_grace(deployment, budget, findings)
    return budget, findings


def together_findings(docs):
    findings = []
    check_deploy.check_together(docs, {"consumer-policy.json": {"Statement": [{"Resource": "*:orders"}]}}, findings)
    return findings


def main():
    failures = []

    def expect(what, findings, wanted):
        hits = [f for f in findings if wanted in f]
        if not hits:
            failures.append(f"{what}: no finding naming {wanted!r} (findings: {findings})")
        else:
            print(f"self-test: {what}: refused ({hits[0]})")

    shipped = documents()
    budget, findings = grace_findings(shipped)
    if findings:
        failures.append(f"the shipped Deployment's grace period is refused: {findings}")
    least = math.ceil(budget["total_secs"] + check_deploy.MARGIN_SECS)

    short = copy.deepcopy(shipped)
    pod_spec(short)["terminationGracePeriodSeconds"] = least - 1
    expect(f"a grace period of {least - 1} s", grace_findings(short)[1], "terminationGracePeriodSeconds")

    exact = copy.deepcopy(shipped)
    pod_spec(exact)["terminationGracePeriodSeconds"] = least
    if grace_findings(exact)[1]:
        failures.append(f"a grace period of exactly {least} s is refused")

    # The settings come from the Deployment: a longer shutdown timeout needs a longer grace.
    slow = copy.deepcopy(shipped)
    timeout = int(budget["handlers_secs"]) + 60
    env_var(slow, "SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS", str(timeout))
    expect(f"SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS={timeout} with the shipped grace period", grace_findings(slow)[1], "terminationGracePeriodSeconds")

    if together_findings(copy.deepcopy(shipped)):
        failures.append(f"the shipped manifests are refused: {together_findings(copy.deepcopy(shipped))}")

    in_flight = copy.deepcopy(shipped)
    trigger(in_flight, "aws-sqs-queue")["metadata"]["scaleOnInFlight"] = "true"
    expect("a queue trigger counting the messages in flight", together_findings(in_flight), "scaleOnInFlight")

    threshold = copy.deepcopy(shipped)
    trigger(threshold, "prometheus")["metadata"]["threshold"] = "5"
    expect("a prometheus threshold other than SQS_ENGINE_MAX_HELD", together_findings(threshold), "threshold")

    query = copy.deepcopy(shipped)
    trigger(query, "prometheus")["metadata"]["query"] = 'sum(sqs_engine_messages_parked{queue="orders"})'
    expect("a prometheus query on another gauge", together_findings(query), "query")

    for failure in failures:
        print(f"SELF-TEST FAILED {failure}")
    if failures:
        return 1
    print("deploy check self-test: every modified copy refused, the shipped files passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
