"""Validates deploy/ offline; run by scripts/check-deploy.sh inside its pinned venv.

- Kubernetes' own kinds: kubernetes-validate, strict (unknown fields are errors), against the
  schemas it ships for the given Kubernetes version.
- KEDA's ScaledObject and TriggerAuthentication and the Prometheus operator's PodMonitor, which
  kubernetes-validate does not know: the JSON schemas in deploy/schemas.
- The IAM policies in deploy/iam: deploy/schemas/iam-sqs-policy.schema.json.
- The settings the files share: the ScaledObject's queueLength and Prometheus threshold are
  what one instance holds (SQS_ENGINE_MAX_HELD, which must cover workers + prefetch), its queue
  trigger leaves the in-flight count (parked messages) to the engine's own gauge, the names and
  labels meet.
- The grace period outlasts the shutdown's worst case, which the service itself states: the
  `service` example, built with cargo and run with the Deployment's SQS_ENGINE_* variables and
  --shutdown-budget, prints it from those settings and the engine's defaults; the grace period
  must cover it plus MARGIN_SECS.

A kind known to neither is a finding too. Prints every finding; exits 1 when there is any.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
SCHEMAS = DEPLOY / "schemas"

# The custom resources, by (apiVersion, kind), and the schema each is checked against.
CUSTOM = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda-scaledobject.schema.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "keda-triggerauthentication.schema.json",
    ("monitoring.coreos.com/v1", "PodMonitor"): "podmonitor.schema.json",
}
IAM_SCHEMA = "iam-sqs-policy.schema.json"

# Beyond the service's own worst case: the process's exit, and the kubelet's SIGTERM reaching it.
MARGIN_SECS = 5
# The engine's gauge of the messages one instance holds, which the Prometheus trigger sums.
HELD_GAUGE = "sqs_engine_messages_in_flight"


def validator(name):
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def where(error):
    return ".".join(str(part) for part in error.absolute_path) or "(document)"


def check_documents(version, findings):
    """Validates every document of every manifest; returns them by kind."""
    validators = {key: validator(name) for key, name in CUSTOM.items()}
    documents = []
    files = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
    if not files:
        findings.append("deploy/kubernetes holds no manifest")
    for path in files:
        label = path.relative_to(ROOT)
        try:
            loaded = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        except yaml.YAMLError as error:
            findings.append(f"{label}: not YAML: {error}")
            continue
        for doc in loaded:
            if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
                findings.append(f"{label}: a document without apiVersion and kind")
                continue
            key = (doc["apiVersion"], doc["kind"])
            name = f"{label}: {doc['kind']} {doc.get('metadata', {}).get('name', '?')}"
            if key in validators:
                errors = sorted(validators[key].iter_errors(doc), key=str)
                for error in errors:
                    findings.append(f"{name}: {where(error)}: {error.message}")
                how = f"deploy/schemas/{CUSTOM[key]}"
            else:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as error:
                    findings.append(f"{name}: {where(error)}: {error.message}")
                except kubernetes_validate.SchemaNotFoundError as error:
                    findings.append(f"{name}: {error.message}, nor has deploy/schemas one")
                how = f"kubernetes-validate {kubernetes_validate.__version__} (Kubernetes {version}, strict)"
            print(f"checked {name} with {how}")
            documents.append(doc)
    return documents


def check_policies(findings):
    check = validator(IAM_SCHEMA)
    policies = {}
    for path in sorted((DEPLOY / "iam").glob("*.json")):
        label = path.relative_to(ROOT)
        try:
            policy = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            findings.append(f"{label}: not JSON: {error}")
            continue
        for error in sorted(check.iter_errors(policy), key=str):
            findings.append(f"{label}: {where(error)}: {error.message}")
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            actions = statement.get("Action", [])
            for action in actions if isinstance(actions, list) else [actions]:
                if str(action).endswith("Batch"):
                    single = str(action).removesuffix("Batch")
                    findings.append(
                        f"{label}: {action} is not an IAM action: the batch call is allowed by {single}"
                    )
        print(f"checked {label} with deploy/schemas/{IAM_SCHEMA}")
        policies[path.name] = policy
    return policies


def one(documents, kind, findings):
    found = [doc for doc in documents if doc.get("kind") == kind]
    if len(found) != 1:
        findings.append(f"deploy/kubernetes: {len(found)} {kind} documents, expected one")
        return None
    return found[0]


def shutdown_budget(env):
    """The service's worst-case shutdown, as `service --shutdown-budget` states it when run with
    the Deployment's variables `env` (and no other SQS_ENGINE_* variable). Builds the example
    with cargo first (a no-op when it is up to date). Raises RuntimeError when either fails."""
    build = subprocess.run(
        ["cargo", "build", "--workspace", "--locked", "--example", "service", "--message-format=json"],
        cwd=ROOT, capture_output=True, text=True,
    )
    if build.returncode != 0:
        raise RuntimeError(f"cargo build --example service failed:\n{build.stderr}")
    binary = None
    for line in build.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message["target"]["name"] == "service":
            binary = message.get("executable") or binary
    if binary is None:
        raise RuntimeError("cargo built no `service` executable")
    clean = {key: value for key, value in os.environ.items() if not key.startswith("SQS_ENGINE_")}
    clean.update({key: str(value) for key, value in env.items() if key and value is not None})
    run = subprocess.run([binary, "--shutdown-budget"], env=clean, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"service --shutdown-budget failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


def container_env(deployment):
    containers = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    if len(containers) != 1:
        return None
    return {var.get("name"): var.get("value") for var in containers[0].get("env", [])}


def check_grace(deployment, budget, findings):
    """The Deployment's grace period covers `budget` (from shutdown_budget) and the margin."""
    grace = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("terminationGracePeriodSeconds")
    least = math.ceil(budget["total_secs"] + MARGIN_SECS)
    if not isinstance(grace, int) or isinstance(grace, bool) or grace < least:
        findings.append(
            f"Deployment: terminationGracePeriodSeconds {grace!r} is shorter than the shutdown's worst "
            f"case: {budget['receivers_stop_secs']} s for the receivers + {budget['handlers_secs']} s "
            f"for the handlers + {budget['flush_secs']} s for the settlements' flush + "
            f"{MARGIN_SECS} s margin = {least} s (service --shutdown-budget)"
        )


def number(env, name, findings):
    try:
        return int(env[name])
    except (KeyError, ValueError):
        findings.append(f"Deployment: {name} must be set to a whole number")
        return None


def check_together(documents, policies, findings):
    deployment = one(documents, "Deployment", findings)
    scaled = one(documents, "ScaledObject", findings)
    monitor = one(documents, "PodMonitor", findings)
    if deployment is None:
        return
    pod = deployment.get("spec", {}).get("template", {})
    pod_labels = pod.get("metadata", {}).get("labels", {})
    containers = pod.get("spec", {}).get("containers", [])
    if len(containers) != 1:
        findings.append("Deployment: expected one container")
        return
    env = {var.get("name"): var.get("value") for var in containers[0].get("env", [])}
    ports = {port.get("name"): port.get("containerPort") for port in containers[0].get("ports", [])}

    workers = number(env, "SQS_ENGINE_WORKERS", findings)
    prefetch = number(env, "SQS_ENGINE_PREFETCH", findings)
    max_held = number(env, "SQS_ENGINE_MAX_HELD", findings)
    if None not in (workers, prefetch, max_held) and max_held < workers + prefetch:
        findings.append(
            f"Deployment: SQS_ENGINE_MAX_HELD {max_held} does not cover workers + prefetch "
            f"= {workers} + {prefetch}: handlers would wait for room"
        )
    number(env, "SQS_ENGINE_SHUTDOWN_TIMEOUT_SECS", findings)

    metrics_port = (env.get("SQS_ENGINE_METRICS_ADDR") or "").rpartition(":")[2]
    if str(ports.get("metrics")) != metrics_port:
        findings.append(
            f"Deployment: port `metrics` ({ports.get('metrics')}) is not the port of "
            f"SQS_ENGINE_METRICS_ADDR ({env.get('SQS_ENGINE_METRICS_ADDR')})"
        )

    queue = env.get("SQS_ENGINE_QUEUE") or ""
    queue_name = queue.rstrip("/").rpartition("/")[2]

    if scaled is not None:
        spec = scaled.get("spec", {})
        if spec.get("scaleTargetRef", {}).get("name") != deployment["metadata"]["name"]:
            findings.append("ScaledObject: scaleTargetRef does not name the Deployment")
        triggers = spec.get("triggers", [])
        kinds = [trigger.get("type") for trigger in triggers]
        for kind in ("aws-sqs-queue", "prometheus"):
            if kinds.count(kind) != 1:
                findings.append(f"ScaledObject: {kinds.count(kind)} {kind} triggers, expected one")
        for trigger in triggers:
            meta = trigger.get("metadata", {})
            if trigger.get("type") == "aws-sqs-queue":
                if max_held is not None and meta.get("queueLength") != str(max_held):
                    findings.append(
                        f"ScaledObject: queueLength {meta.get('queueLength')!r} is not what one "
                        f"instance holds, SQS_ENGINE_MAX_HELD = {max_held}"
                    )
                if meta.get("queueURL") and meta.get("queueURL") != queue:
                    findings.append("ScaledObject: queueURL is not the Deployment's SQS_ENGINE_QUEUE")
                if meta.get("scaleOnInFlight", "true") != "false":
                    findings.append(
                        "ScaledObject: the aws-sqs-queue trigger counts the messages in flight, "
                        "parked ones (retry_after) included: set scaleOnInFlight \"false\" and "
                        "leave the messages held to the prometheus trigger"
                    )
            elif trigger.get("type") == "prometheus":
                if max_held is not None and meta.get("threshold") != str(max_held):
                    findings.append(
                        f"ScaledObject: the prometheus threshold {meta.get('threshold')!r} is not "
                        f"what one instance holds, SQS_ENGINE_MAX_HELD = {max_held}"
                    )
                query = meta.get("query") or ""
                if HELD_GAUGE not in query or f'queue="{queue_name}"' not in query:
                    findings.append(
                        f"ScaledObject: the prometheus query does not read {HELD_GAUGE} of "
                        f'queue="{queue_name}": {query!r}'
                    )

    if monitor is not None:
        spec = monitor.get("spec", {})
        wanted = spec.get("selector", {}).get("matchLabels", {})
        if any(pod_labels.get(key) != value for key, value in wanted.items()):
            findings.append("PodMonitor: its selector does not match the Deployment's pods")
        for endpoint in spec.get("podMetricsEndpoints", []):
            if "port" in endpoint and endpoint["port"] not in ports:
                findings.append(f"PodMonitor: the pods have no port named {endpoint['port']!r}")

    consumer = policies.get("consumer-policy.json")
    if consumer is None:
        findings.append("deploy/iam: consumer-policy.json is missing")
    else:
        resources = [
            resource
            for statement in consumer.get("Statement", [])
            for resource in (statement.get("Resource") if isinstance(statement.get("Resource"), list) else [statement.get("Resource")])
        ]
        if queue_name and not any(str(resource).endswith(f":{queue_name}") for resource in resources):
            findings.append(f"deploy/iam/consumer-policy.json: no statement on queue {queue_name!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    args = parser.parse_args()

    findings = []
    documents = check_documents(args.kubernetes_version, findings)
    policies = check_policies(findings)
    check_together(documents, policies, findings)
    deployment = one(documents, "Deployment", [])
    env = container_env(deployment) if deployment is not None else None
    if env is not None:
        try:
            budget = shutdown_budget(env)
        except RuntimeError as error:
            findings.append(f"Deployment: no shutdown budget: {error}")
        else:
            print(f"shutdown budget (service --shutdown-budget): {json.dumps(budget)}")
            check_grace(deployment, budget, findings)
    for finding in findings:
        print(f"FINDING {finding}")
    if findings:
        print(f"deploy check: {len(findings)} finding(s)")
        return 1
    print(f"deploy check: {len(documents)} resources and {len(policies)} IAM policies, no findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
