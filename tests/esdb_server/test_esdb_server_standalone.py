"""The test server stands on its own: its gRPC code is generated from its own ``.proto`` files,
so it runs where neither client package is installed, and a client shares its process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from esdbclient import EventStoreDBClient, NewEvent, StreamState

PROTO_DIR = Path(__file__).parents[2] / "stores" / "esdb" / "_proto"


def test_server_runs_without_either_client_package() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["esdbclient"] = None  # importing them now fails
        sys.modules["kurrentdbclient"] = None
        import grpc
        from decider.stores.esdb.testserver import EsdbTestServer
        from decider.stores.esdb._proto import streams_pb2
        from decider.stores.esdb._proto import streams_pb2_grpc

        with EsdbTestServer() as server:
            channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
            request = streams_pb2.ReadReq()
            options = request.options
            options.all.start.SetInParent()
            options.count = 10
            options.no_filter.SetInParent()
            options.uuid_option.string.SetInParent()
            read = channel.unary_stream("/event_store.client.streams.Streams/Read",
                request_serializer=streams_pb2.ReadReq.SerializeToString,
                response_deserializer=streams_pb2.ReadResp.FromString)
            types = [r.event.event.metadata["type"] for r in read(request)]
            channel.close()
        loaded = [m for m in ("esdbclient", "kurrentdbclient") if sys.modules.get(m)]
        print(types[0], loaded)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "$epoch-information []"


def test_a_client_and_the_server_share_a_process(client: EventStoreDBClient, stream: str) -> None:
    # both define event_store.client.* messages: the server's live in a pool of their own
    position = client.append_to_stream(
        stream, current_version=StreamState.NO_STREAM, events=[NewEvent(type="A", data=b"{}")]
    )
    assert client.get_stream(stream)[0].commit_position == position


def test_every_proto_has_its_generated_module() -> None:
    for proto in PROTO_DIR.glob("*.proto"):
        generated = PROTO_DIR / f"{proto.stem}_pb2.py"
        assert generated.exists(), f"{generated.name} missing: run _proto/_generate.py"
        assert f"source: decider/stores/esdb/_proto/{proto.name}" in (generated.read_text())


def test_the_server_module_names_no_client_package() -> None:
    for module in PROTO_DIR.parent.rglob("*.py"):
        code = [
            line
            for line in module.read_text().splitlines()
            if line.startswith(("import ", "from "))
        ]
        assert not [line for line in code if "esdbclient" in line or "kurrentdbclient" in line]
