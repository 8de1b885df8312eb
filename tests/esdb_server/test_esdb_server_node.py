"""The node around the streams: gossip, persistent-subscription listing, sessions, the file,
and the command line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from esdbclient import EventStoreDBClient, StreamState

from decider.stores.esdb.testserver import EsdbTestServer
from tests.esdb_server.esdb_server_helpers import commit_position, events
from tests.support.waiting import wait_until


def test_gossip_reports_one_leader(esdb_server: EsdbTestServer) -> None:
    with EventStoreDBClient(esdb_server.uri) as client:
        [member] = client.read_gossip()
    assert (member.state, member.address, member.port) == (
        "NODE_STATE_LEADER",
        "127.0.0.1",
        esdb_server.port,
    )


def test_discovery_through_gossip(esdb_server: EsdbTestServer, stream: str) -> None:
    uri = f"esdb+discover://127.0.0.1:{esdb_server.port}?Tls=false"
    with EventStoreDBClient(uri) as client:
        client.append_to_stream(stream, current_version=StreamState.NO_STREAM, events=events(1))
        assert client.get_current_version(stream) == 0


def test_a_fresh_node_lists_no_persistent_subscriptions(fresh_server: EsdbTestServer) -> None:
    with EventStoreDBClient(fresh_server.uri) as client:
        assert client.list_subscriptions() == []
        assert client.list_subscriptions_to_stream("anything") == []


def test_session_connects_and_closes(esdb_server: EsdbTestServer) -> None:
    client = EventStoreDBClient(esdb_server.uri)
    subscription = client.subscribe_to_all(from_end=True)
    client.close()
    assert client.is_closed
    wait_until(lambda: subscription._is_stopped)  # type: ignore[attr-defined]


def test_server_restarts_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with EsdbTestServer(path=path) as server, EventStoreDBClient(server.uri) as client:
        client.append_to_stream("s", current_version=StreamState.NO_STREAM, events=events(2))
        client.append_to_stream("t", current_version=StreamState.NO_STREAM, events=events(1))
        client.tombstone_stream("t", current_version=0)
        before = list(client.read_all(filter_exclude=()))
    with path.open("a") as file:
        file.write('{"p": 1')  # a torn last line, as if the process died mid-write
    with EsdbTestServer(path=path) as server, EventStoreDBClient(server.uri) as client:
        after = list(client.read_all(filter_exclude=()))
        assert after[: len(before)] == before
        assert [commit_position(e) for e in after] == sorted(commit_position(e) for e in after)
        assert client.get_current_version("s") == 1
        client.append_to_stream("s", current_version=1, events=events(1))
        assert [e.stream_position for e in client.get_stream("s")] == [0, 1, 2]
        assert after[-1].type.startswith("$"), "a restarted node writes a new epoch"
        epochs = client.get_stream("$epoch-information")
        assert [e.stream_position for e in epochs] == [0, 1], "one epoch per start"
    assert path.read_text().endswith("\n")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_command_line_serves_until_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "decider.stores.esdb.testserver",
            "--port",
            str(port),
            "--file",
            str(tmp_path / "log.jsonl"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        assert f"127.0.0.1:{port}" in process.stdout.readline()
        with EventStoreDBClient(f"esdb://127.0.0.1:{port}?Tls=false") as client:
            client.append_to_stream("s", current_version=StreamState.NO_STREAM, events=events(1))
            assert client.get_current_version("s") == 0
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()
    assert (tmp_path / "log.jsonl").stat().st_size > 0
