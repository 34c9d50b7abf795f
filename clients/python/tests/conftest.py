"""Fixtures: a tidemark server per test module (Postgres when
TIDEMARK_TEST_DATABASE_URL is set, as scripts/test.sh does; otherwise an
SQLite file), one SparkSession for the whole run, Paimon warehouses."""

from __future__ import annotations

import os
import pathlib
import uuid

import pytest

from harness import TidemarkServer, local_spark

from tidemark import Client


def database_url(tmp_dir: pathlib.Path) -> str:
    return os.environ.get("TIDEMARK_TEST_DATABASE_URL") or f"sqlite://{tmp_dir / 'tidemark.db'}"


@pytest.fixture(scope="module")
def tidemark_server(tmp_path_factory):
    """A shared server; tests keep apart by table and consumer names."""
    directory = tmp_path_factory.mktemp("tidemark")
    server = TidemarkServer(database_url(directory), directory / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def own_server(tmp_path):
    """A server of the test's own, for tests that kill and restart it."""
    server = TidemarkServer(database_url(tmp_path), tmp_path / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def client_for():
    clients = []

    def make(server: TidemarkServer) -> Client:
        client = Client(server.endpoint, timeout=10.0)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def unique():
    """A short unique name (Paimon database names, consumer ids)."""
    return lambda prefix: f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the run, kept on loopback, with the
    tidemark_paimon source registered."""
    session = local_spark("tidemark-e2e", spark_sql_shuffle_partitions="2", spark_sql_streaming_stopTimeout="30s")
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter):
    from harness import commit_latency_summary

    summary = commit_latency_summary()
    if summary:
        terminalreporter.write_line(summary)
