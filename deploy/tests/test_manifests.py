"""The Kubernetes manifests: every overlay renders with `kubectl kustomize`,
passes `kubernetes-validate --strict`, and carries the security settings,
probes and rollout rules the deployment depends on. The container image's
Dockerfile is checked for the same properties (no daemon here to build it).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

DEPLOY = pathlib.Path(__file__).resolve().parents[1]
REPO = DEPLOY.parent
KUBERNETES_VERSION = "1.37.0"
TARGETS = ["base", "overlays/dev", "overlays/prod"]
# What is deployed as it is (the base is only built upon).
DEPLOYABLE = ["overlays/dev", "overlays/prod", "examples/cloudnativepg", "examples/migrate-job"]
# Rendered and validated; its pods are prod's.
EXAMPLES = ["examples/monitoring"]


def render(target: str) -> str:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with kustomize) is needed to render the manifests"
    result = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / target)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"kubectl kustomize {target} failed:\n{result.stderr}"
    return result.stdout


def objects(target: str) -> list:
    return [o for o in yaml.safe_load_all(render(target)) if o]


def one(objs: list, kind: str, name: str) -> dict:
    def named(actual: str) -> bool:
        # Generated ConfigMaps and Secrets carry a content hash suffix.
        return actual == name or (kind in ("ConfigMap", "Secret") and actual.startswith(name + "-"))

    found = [o for o in objs if o["kind"] == kind and named(o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def validate(path: pathlib.Path) -> subprocess.CompletedProcess:
    validator = pathlib.Path(os.environ.get("TIDEMARK_PYTHON", "python3")).parent / "kubernetes-validate"
    command = [str(validator)] if validator.exists() else [shutil.which("kubernetes-validate") or "kubernetes-validate"]
    return subprocess.run(
        command + ["--strict", "--kubernetes-version", KUBERNETES_VERSION, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("target", TARGETS)
def test_every_overlay_renders_and_validates_strictly(target, tmp_path):
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(render(target))
    result = validate(rendered)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout + result.stderr


def test_the_validator_rejects_what_it_should(tmp_path):
    """The strict check is not vacuous: an unknown field fails it."""
    objs = objects("overlays/prod")
    deployment = one(objs, "Deployment", "tidemark")
    deployment["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpcc"] = {"port": 8081}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(deployment))
    assert validate(bad).returncode != 0


def pod_spec(objs: list) -> dict:
    return one(objs, "Deployment", "tidemark")["spec"]["template"]["spec"]


@pytest.mark.parametrize("target", ["overlays/dev", "overlays/prod"])
def test_the_pods_run_locked_down(target):
    objs = objects(target)
    spec = pod_spec(objs)
    assert spec["automountServiceAccountToken"] is False
    account = one(objs, "ServiceAccount", spec["serviceAccountName"])
    assert account["automountServiceAccountToken"] is False
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] == 65532
    assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
    containers = spec["containers"] + spec.get("initContainers", [])
    assert len(containers) == 2
    for container in containers:
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, container["name"]
        assert security["readOnlyRootFilesystem"] is True, container["name"]
        assert security["capabilities"]["drop"] == ["ALL"], container["name"]
        assert container["resources"]["requests"]["cpu"], container["name"]
        assert container["resources"]["limits"]["memory"], container["name"]
    # The root filesystem is read-only: large exports spool to a writable,
    # size-limited emptyDir at /tmp (the server's temporary directory).
    tidemark = next(c for c in spec["containers"] if c["name"] == "tidemark")
    mounts = {m["mountPath"]: m["name"] for m in tidemark["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts["/tmp"]]["emptyDir"]["sizeLimit"]


@pytest.mark.parametrize("target", ["overlays/dev", "overlays/prod"])
def test_probes_rollout_and_migrations(target):
    objs = objects(target)
    deployment = one(objs, "Deployment", "tidemark")
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    server = next(c for c in spec["containers"] if c["name"] == "tidemark")
    # Native gRPC probes on the plaintext health port: liveness on the
    # process (""), readiness on the database ("readiness").
    assert server["livenessProbe"]["grpc"] == {"port": 8081, "service": ""}
    assert server["readinessProbe"]["grpc"] == {"port": 8081, "service": "readiness"}
    assert server["startupProbe"]["grpc"]["port"] == 8081
    config = one(objs, "ConfigMap", "tidemark-config")
    data = config["data"]
    assert data["TIDEMARK_HEALTH_LISTEN"].endswith(":8081")
    # Migrations run first, in an init container, and the server skips them.
    (migrate,) = spec["initContainers"]
    assert migrate["args"] == ["migrate"]
    assert data["TIDEMARK_NO_MIGRATE"] == "true"
    # The config is referenced by its content-hashed name, so a change rolls the pods.
    assert re.fullmatch(r"tidemark-config-[a-z0-9]{10}", config["metadata"]["name"])
    for container in (server, migrate):
        assert container["envFrom"][0]["configMapRef"]["name"] == config["metadata"]["name"]
    # Terminating pods get the whole drain and grace.
    drain = int(data["TIDEMARK_SHUTDOWN_DRAIN"].rstrip("s"))
    grace = int(data["TIDEMARK_SHUTDOWN_GRACE"].rstrip("s"))
    assert spec["terminationGracePeriodSeconds"] > drain + grace
    keys = {c["topologyKey"] for c in spec["topologySpreadConstraints"]}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == data["TIDEMARK_METRICS_LISTEN"].rsplit(":", 1)[1]


@pytest.mark.parametrize("target", ["overlays/dev", "overlays/prod"])
def test_service_disruption_budget_and_network_policy(target):
    objs = objects(target)
    pod_labels = one(objs, "Deployment", "tidemark")["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict) -> bool:
        return all(pod_labels.get(k) == v for k, v in selector.items())

    service = one(objs, "Service", "tidemark")
    assert selects(service["spec"]["selector"])
    grpc = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert grpc["appProtocol"] == "grpc"
    # The headless Service the SDKs balance over: only ready replicas.
    headless = one(objs, "Service", "tidemark-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"].get("publishNotReadyAddresses", False) is False
    assert selects(headless["spec"]["selector"])
    assert [p["port"] for p in headless["spec"]["ports"]] == [50051]
    budget = one(objs, "PodDisruptionBudget", "tidemark")
    assert selects(budget["spec"]["selector"]["matchLabels"])
    policy = one(objs, "NetworkPolicy", "tidemark")
    assert selects(policy["spec"]["podSelector"]["matchLabels"])
    rules = {rule["ports"][0]["port"]: rule["from"] for rule in policy["spec"]["ingress"]}
    assert set(rules) == {"grpc", "metrics"}, "nothing else is reachable"
    assert rules["grpc"][0]["podSelector"]["matchLabels"] == {"tidemark.io/client": "true"}
    assert rules["metrics"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_prod_authenticates_and_uses_tls_dev_brings_its_own_postgres():
    prod = objects("overlays/prod")
    data = one(prod, "ConfigMap", "tidemark-config")["data"]
    assert "TIDEMARK_INSECURE_NO_AUTH" not in data
    assert data["TIDEMARK_AUTH_FILE"].startswith("/etc/tidemark/auth/")
    assert data["TIDEMARK_TLS_CERT"].startswith("/etc/tidemark/tls/")
    volumes = {v["name"]: v for v in pod_spec(prod)["volumes"]}
    assert volumes["auth"]["secret"]["secretName"] == "tidemark-auth"
    assert volumes["tls"]["secret"]["secretName"] == "tidemark-tls"
    assert one(prod, "Deployment", "tidemark")["spec"]["replicas"] >= 3
    assert not [o for o in prod if o["kind"] == "Secret"], "production secrets are not in the repository"

    dev = objects("overlays/dev")
    postgres = one(dev, "StatefulSet", "postgres")
    assert postgres["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    url = one(dev, "Secret", "tidemark-database")
    assert "url" in (url.get("data") or {})


def test_every_setting_is_a_real_flag_of_the_binary():
    """A typo in a TIDEMARK_* key would be silently ignored by the binary."""
    binary = os.environ.get("TIDEMARK_BIN") or str(REPO / "target" / "debug" / "tidemark")
    if not pathlib.Path(binary).exists():
        subprocess.run(["cargo", "build", "-q", "-p", "tidemark"], cwd=REPO, check=True)
    accepted = set()
    for command in (["serve", "--help"], ["migrate", "--help"]):
        out = subprocess.run([binary, *command], capture_output=True, text=True, check=True).stdout
        accepted |= set(re.findall(r"env: (TIDEMARK_[A-Z_]+)=", out))
    for target in ["overlays/dev", "overlays/prod"]:
        data = one(objects(target), "ConfigMap", "tidemark-config")["data"]
        unknown = sorted(set(data) - accepted)
        assert not unknown, f"{target}: not flags of tidemark serve/migrate: {unknown}"


def test_the_image_is_small_non_root_and_has_no_build_tools():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    assert len(stages) >= 2, "multi-stage"
    final = stages[-1]
    assert final.startswith("gcr.io/distroless/"), "no shell or package manager in the runtime image"
    assert ":nonroot" in final.splitlines()[0]
    assert re.search(r"^USER 65532:65532$", final, flags=re.M)
    assert "cargo" not in final and "rustc" not in final
    assert "--locked" in stages[0]
    ignored = (REPO / ".dockerignore").read_text().split()
    assert "target/" in ignored and ".git/" in ignored


def test_the_cloudnativepg_example_uses_the_read_write_service_and_synchronous_replication(tmp_path):
    objs = objects("examples/cloudnativepg")
    cluster = one(objs, "Cluster", "tidemark-db")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    spec = cluster["spec"]
    assert spec["instances"] >= 3
    synchronous = spec["postgresql"]["synchronous"]
    assert synchronous["number"] >= 1
    # A primary alone never acknowledges a commit.
    assert synchronous["dataDurability"] == "required"
    assert spec["postgresql"]["parameters"]["synchronous_commit"] in ("on", "remote_apply")
    # Every container that reaches the database (migrations and the server)
    # takes the URI CloudNativePG writes for its read-write Service.
    pod = one(objs, "Deployment", "tidemark")["spec"]["template"]["spec"]
    containers = pod["initContainers"] + pod["containers"]
    for container in containers:
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["TIDEMARK_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "tidemark-db-app",
            "key": "uri",
        }, container["name"]
    # The rest validates strictly (the Cluster is a custom resource the
    # validator has no schema for).
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all([o for o in objs if o["kind"] != "Cluster"]))
    result = validate(rendered)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_patroni_example_is_what_the_failover_tests_run():
    patroni = DEPLOY / "examples" / "patroni"
    script = (REPO / "scripts" / "ha-cluster.sh").read_text()
    # scripts/ha-cluster.sh builds its cluster from these very files.
    assert "deploy/examples/patroni/patroni-dcs.yaml" in script
    assert "deploy/examples/patroni/haproxy.cfg" in script
    dcs = yaml.safe_load((patroni / "patroni-dcs.yaml").read_text())
    assert dcs["synchronous_mode"] is True
    assert dcs["postgresql"]["parameters"]["synchronous_commit"] in ("on", "remote_apply")
    # Patroni's own rules: ttl at least 20 s, loop_wait + 2 retry_timeout within it.
    assert dcs["ttl"] >= 20
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]
    haproxy = (patroni / "haproxy.cfg").read_text()
    assert "http-check send meth OPTIONS uri /primary" in haproxy
    assert "on-marked-down shutdown-sessions" in haproxy
    assert "  bind *:5000\n" in haproxy


def test_each_overlay_names_its_own_image():
    """The base leaves the placeholder `tidemark`; each deployable target's
    `images:` entry (what `kustomize edit set image tidemark=...` writes)
    is what its pods run."""
    for container in pod_containers("base"):
        assert container["image"] == "tidemark"
    for target in DEPLOYABLE:
        kustomization = yaml.safe_load((DEPLOY / target / "kustomization.yaml").read_text())
        entries = [i for i in kustomization.get("images") or [] if i["name"] == "tidemark"]
        if not entries:
            continue  # inherits its base's (the CloudNativePG example: prod's)
        want = f"{entries[0]['newName']}:{entries[0]['newTag']}"
        for container in pod_containers(target):
            assert container["image"] == want, (target, container["name"], container["image"])


def pod_containers(target: str) -> list:
    containers = []
    for workload in objects(target):
        if workload["kind"] in ("Deployment", "Job"):
            spec = workload["spec"]["template"]["spec"]
            containers += spec.get("initContainers", []) + spec["containers"]
    return containers


def test_production_spreads_by_node_waits_before_counting_a_pod_and_guards_reflection():
    objs = objects("overlays/prod")
    deployment = one(objs, "Deployment", "tidemark")
    assert deployment["spec"]["minReadySeconds"] >= 5
    spread = {c["topologyKey"]: c for c in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]}
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert len(spread) == 2
    config = one(objs, "ConfigMap", "tidemark-config")["data"]
    assert config["TIDEMARK_REFLECTION_REQUIRES_AUTH"] == "true"


def test_the_migration_job_replaces_the_init_container():
    objs = objects("examples/migrate-job")
    job = one(objs, "Job", "tidemark-migrate")
    deployment = one(objs, "Deployment", "tidemark")
    assert "initContainers" not in deployment["spec"]["template"]["spec"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["migrate"]
    # The Job lands beside the server and reads the same settings.
    assert job["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    config = one(objs, "ConfigMap", "tidemark-config")["metadata"]["name"]
    assert container["envFrom"][0]["configMapRef"]["name"] == config
