"""The test server itself: a gRPC server with the Streams, Gossip and PersistentSubscriptions
services over one in-memory :class:`~decider.stores.esdb.testserver.log.EventLog`, optionally kept
in a
file."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Self

import grpc

from decider.stores.esdb._proto import (
    POOL,
    gossip_pb2_grpc,
    persistent_pb2_grpc,
    serverfeatures_pb2_grpc,
    streams_pb2_grpc,
    streams_v2_pb2_grpc,
)
from decider.stores.esdb.testserver.log import EventLog
from decider.stores.esdb.testserver.persistence import LogFile
from decider.stores.esdb.testserver.persistent_service import PersistentSubscriptionsServicer
from decider.stores.esdb.testserver.services import GossipServicer
from decider.stores.esdb.testserver.streams_service import StreamsServicer
from decider.stores.esdb.testserver.streams_v2_service import (
    VERSIONS,
    ServerFeaturesServicer,
    StreamsV2Servicer,
)

_MESSAGE_LIMIT = 17 * 1024 * 1024  # what esdbclient allows; bigger appends get ESDB's own error


_SERVICES = (
    "event_store.client.streams.Streams",
    "event_store.client.persistent_subscriptions.PersistentSubscriptions",
    "event_store.client.gossip.Gossip",
    "event_store.client.server_features.ServerFeatures",
    "kurrentdb.protocol.v2.streams.StreamsService",
)


def _served_methods(version: str) -> dict[str, list[str]]:
    """The methods of every service a node of ``version`` (one of :data:`VERSIONS`) serves,
    as ``ServerFeatures`` lists them: 24.10 has no v2 call, 25.1 no ``AppendRecords``."""
    return {
        name: [
            m.name
            for m in POOL.FindServiceByName(name).methods
            if version == "26.1" or m.name != "AppendRecords"
        ]
        for name in _SERVICES
        if version != "24.10" or not name.startswith("kurrentdb.")
    }


class EsdbTestServer:
    """An EventStoreDB-compatible gRPC server (insecure, single node) for tests and demos.

    ``port=0`` picks a free port; :attr:`uri` is the connection string for either client.
    With ``path`` the log is reloaded from that file at start and every write is appended to
    it. It acts as a KurrentDB 26.1 node: ``append_records=False`` serves no v2
    ``AppendRecords`` (as a 25.1 node), ``append_session=False`` no v2 call at all (as an
    EventStoreDB 24.10 node). Every open subscription holds one of ``max_workers`` threads
    while it waits (on a condition variable), so the pool is large.

    WARNING: it reproduces the Streams API (see docs/esdb.md for what it leaves out); it is
    not a database: no TLS, no ACLs, no scavenging, one lock for all writes.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str | os.PathLike[str] | None = None,
        max_workers: int = 512,
        *,
        append_session: bool = True,
        append_records: bool = True,
    ) -> None:
        self._host = host
        self._requested_port = port
        self._file = LogFile(path) if path is not None else None
        self._max_workers = max_workers
        self._append_session = append_session
        self.version = "24.10" if not append_session else "26.1" if append_records else "25.1"
        """The KurrentDB version it acts as (one of :data:`VERSIONS`)."""
        assert self.version in VERSIONS
        self._server: grpc.Server | None = None
        self._port: int | None = None
        self.log = EventLog(sink=self._file.write if self._file else None)
        """The server's log (for tests that want to look inside)."""

    @property
    def port(self) -> int:
        """The bound port; only known once started."""
        if self._port is None:
            raise RuntimeError("the EventStoreDB test server is not started")
        return self._port

    @property
    def uri(self) -> str:
        """``esdb://host:port?Tls=false``: the connection string for ``EventStoreDBClient``."""
        return f"esdb://{self._host}:{self.port}?Tls=false"

    def start(self) -> Self:
        """Load the file (if any), write the node's start-up system events, serve."""
        if self._server is not None:
            raise RuntimeError("the EventStoreDB test server is already started")
        if self._file is not None and not self.log.records:
            self.log.load(self._file.load())
        self.log.closed = False  # a stopped server may be started again on the same log
        self.log.add_system_events()
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="esdb-test"),
            options=[
                ("grpc.max_receive_message_length", _MESSAGE_LIMIT),
                ("grpc.max_send_message_length", _MESSAGE_LIMIT),
                ("grpc.so_reuseport", 0),
            ],
        )
        streams_pb2_grpc.add_StreamsServicer_to_server(  # type: ignore[no-untyped-call]
            StreamsServicer(self.log), server
        )
        persistent_pb2_grpc.add_PersistentSubscriptionsServicer_to_server(  # type: ignore[no-untyped-call]
            PersistentSubscriptionsServicer(self.log), server
        )
        if self._append_session:
            streams_v2_pb2_grpc.add_StreamsServiceServicer_to_server(  # type: ignore[no-untyped-call]
                StreamsV2Servicer(self.log, append_records=self.version == "26.1"), server
            )
        serverfeatures_pb2_grpc.add_ServerFeaturesServicer_to_server(  # type: ignore[no-untyped-call]
            ServerFeaturesServicer(_served_methods(self.version), self.version), server
        )
        port = server.add_insecure_port(f"{self._host}:{self._requested_port}")
        if port == 0:
            raise OSError(
                f"cannot bind the EventStoreDB test server to {self._host}:{self._requested_port}"
            )
        advertised = "localhost" if self._host in ("0.0.0.0", "::", "[::]") else self._host
        gossip_pb2_grpc.add_GossipServicer_to_server(  # type: ignore[no-untyped-call]
            GossipServicer(advertised, port), server
        )
        server.start()
        self._server, self._port = server, port
        return self

    def stop(self, grace: float | None = 0.5) -> None:
        """Stop serving: subscriptions end, the file is closed. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        self.log.close()
        server.stop(grace).wait()
        if self._file is not None:
            self._file.close()

    def wait(self) -> None:
        """Block until the server stops."""
        if self._server is not None:
            self._server.wait_for_termination()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
