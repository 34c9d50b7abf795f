"""Every overlay's pods start: each rendered Deployment's pod is run as the
kubelet and the container runtime would run it (`kubelet.py`: its volumes
materialized with their modes and ownership, a read-only root, its user
and groups, its command, args, working directory and environment, and the
image's ENTRYPOINT, CMD, USER and WORKDIR from deploy/Dockerfile where the
manifest leaves them), with the real `tidemark` binary against a real
Postgres: the init container must succeed and the server must answer its
startup, liveness and readiness probes on the configured ports.

It needs root (a private mount namespace and a chroot per container), the
test suite's Postgres (DATABASE_URL) and a built binary (TIDEMARK_BIN).
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import time
import urllib.parse

import grpc
import pytest

from kubelet import Image, Pod, configmap_data, secret_data
from test_manifests import DEPLOY, DEPLOYABLE, REPO, objects

TOKEN = "tdm_" + "ab" * 32


def fresh_database(name: str) -> str:
    url = os.environ.get("DATABASE_URL")
    assert url, "the pod-start test needs DATABASE_URL (scripts/test.sh starts a Postgres)"
    subprocess.run(
        ["psql", "-qX", "-v", "ON_ERROR_STOP=1", url, "-c", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)",
         "-c", f"CREATE DATABASE {name}"],
        check=True,
        capture_output=True,
        env={**os.environ, "PGOPTIONS": "--client-min-messages=warning"},
    )
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def binary() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("TIDEMARK_BIN", REPO / "target" / "debug" / "tidemark"))
    assert path.exists(), f"no tidemark binary at {path} (build it, or set TIDEMARK_BIN)"
    return path


def token_sha256(directory: pathlib.Path) -> str:
    result = subprocess.run([str(binary()), "token", "hash"], input=TOKEN, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def tls_files(directory: pathlib.Path) -> dict[str, bytes]:
    """A CA and a server certificate for localhost signed by it."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=tidemark",
            "-keyout", "tls.key", "-out", "tls.csr")
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "san.ext", "-out", "tls.crt")
    return {name: (directory / name).read_bytes() for name in ["tls.crt", "tls.key", "ca.crt"]}


def the_outside_secrets(scratch: pathlib.Path, database_url: str) -> dict[str, dict[str, bytes]]:
    """The Secrets an operator creates (docs/deploy.md), for a test."""
    auth = (
        '[[token]]\nname = "pod-start"\n'
        f'sha256 = "{token_sha256(scratch)}"\nroles = ["operator"]\n'
    )
    tls = scratch / "tls"
    tls.mkdir()
    return {
        "tidemark-database": {"url": database_url.encode()},
        "tidemark-auth": {"auth.toml": auth.encode()},
        "tidemark-tls": tls_files(tls),
    }


def health(port: int, service: str) -> int | None:
    """grpc.health.v1.Health/Check on plaintext `port`: the status number
    (1 SERVING, 2 NOT_SERVING), or None when nothing answers."""
    request = service.encode()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda s: (b"\x0a" + bytes([len(s)]) + s) if s else b"",
            response_deserializer=lambda b: b[1] if len(b) >= 2 and b[0] == 0x08 else 0,
        )
        try:
            return check(request, timeout=2)
        except grpc.RpcError:
            return None


def port_of(value: str) -> int:
    return int(value.rsplit(":", 1)[1])


def wait_for(what: str, predicate, limit: float, log: pathlib.Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"{what}: the container exited ({process.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {limit} s:\n{log.read_text()}")
        time.sleep(0.2)


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, as the kubelet sends; SIGKILL after a grace period."""
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_to_completion(pod: Pod, container: dict, image: Image, scratch: pathlib.Path) -> None:
    log = scratch / f"{container['name']}.log"
    process = pod.start(container, image, binary(), log)
    try:
        code = process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"container {container['name']} did not finish:\n{log.read_text()}")
    assert code == 0, f"container {container['name']} failed ({code}):\n{log.read_text()}"


@pytest.mark.parametrize("target", DEPLOYABLE)
def test_every_overlay_s_pods_start_as_the_kubelet_would_run_them(target, tmp_path):
    assert os.geteuid() == 0, "the pod-start test needs root (mount namespaces and chroot), as CI runs it"
    objs = objects(target)
    image = Image(DEPLOY / "Dockerfile")
    configmaps = {o["metadata"]["name"]: configmap_data(o) for o in objs if o["kind"] == "ConfigMap"}
    database_url = fresh_database("pod_start_" + re.sub(r"\W", "_", target))
    secrets = the_outside_secrets(tmp_path, database_url)
    # Secrets the overlay generates itself are used as rendered, but the
    # database URL always points at the test's Postgres.
    secrets.update({o["metadata"]["name"]: secret_data(o) for o in objs if o["kind"] == "Secret"})
    secrets["tidemark-db-app"] = {"uri": database_url.encode()}  # CloudNativePG's
    for name in list(secrets):
        if name.startswith("tidemark-database"):
            secrets[name] = {"url": database_url.encode()}
    # Jobs (migrations) run to completion first, as an operator applies
    # and waits for them; then the Deployments' pods start.
    for job in [o for o in objs if o["kind"] == "Job"]:
        spec = job["spec"]["template"]["spec"]
        scratch = tmp_path / job["metadata"]["name"]
        scratch.mkdir()
        pod = Pod(spec, configmaps, secrets, scratch)
        for container in (spec.get("initContainers") or []) + spec["containers"]:
            run_to_completion(pod, container, image, scratch)
    deployments = [o for o in objs if o["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        spec = deployment["spec"]["template"]["spec"]
        scratch = tmp_path / deployment["metadata"]["name"]
        scratch.mkdir()
        pod = Pod(spec, configmaps, secrets, scratch)
        for container in spec.get("initContainers") or []:
            run_to_completion(pod, container, image, scratch)
        for container in spec["containers"]:
            env = pod.env(container, image)
            ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
            for name, port in ports.items():
                assert not listening(port), f"port {port} ({name}) is taken on this machine"
            log = scratch / f"{container['name']}.log"
            process = pod.start(container, image, binary(), log)
            try:
                for probe_name in ["startupProbe", "livenessProbe", "readinessProbe"]:
                    probe = container.get(probe_name)
                    assert probe and "grpc" in probe, f"{container['name']}: no gRPC {probe_name}"
                    port, service = probe["grpc"]["port"], probe["grpc"].get("service", "")
                    wait_for(f"{probe_name} on {port} ({service!r})", lambda: health(port, service) == 1, 60, log,
                             process)
                # Every declared port is served, on the address the
                # environment gives.
                for port in ports.values():
                    wait_for(f"port {port}", lambda: listening(port), 10, log, process)
                assert port_of(env["TIDEMARK_LISTEN"]) == ports["grpc"]
                assert process.poll() is None, log.read_text()
            finally:
                stop(process)


def test_the_image_serves_as_docker_run_documents_it(tmp_path):
    """`docker run -p 50051:50051 -e TIDEMARK_INSECURE_NO_AUTH=true IMAGE`
    (docs/deploy.md): the image's own defaults (ENTRYPOINT, CMD, USER,
    WORKDIR, ENV) serve on every interface, with SQLite in the writable
    working directory."""
    assert os.geteuid() == 0, "the pod-start test needs root (mount namespaces and chroot), as CI runs it"
    image = Image(DEPLOY / "Dockerfile")
    pod = Pod({}, {}, {}, tmp_path)
    container = {"name": "docker-run", "env": [{"name": "TIDEMARK_INSECURE_NO_AUTH", "value": "true"}]}
    env = pod.env(container, image)
    for port in (50051, 8081, 9464):
        assert not listening(port), f"port {port} is taken on this machine"
    log = tmp_path / "docker-run.log"
    process = pod.start(container, image, binary(), log)
    try:
        wait_for("readiness on 8081", lambda: health(8081, "readiness") == 1, 60, log, process)
        assert env["TIDEMARK_LISTEN"].startswith("0.0.0.0:")
        wait_for("port 50051", lambda: listening(50051), 10, log, process)
        data = pathlib.Path(f"/proc/{process.pid}/root") / image.workdir.lstrip("/")
        assert any(p.name.endswith(".db") for p in data.iterdir()), f"no SQLite file in {image.workdir}"
    finally:
        stop(process)
