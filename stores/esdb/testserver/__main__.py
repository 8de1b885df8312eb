"""``python -m decider.stores.esdb.testserver --port 2113 [--file path]``: serve until
SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import threading
from types import FrameType

from decider.stores.esdb.testserver.server import EsdbTestServer


def main(argv: list[str] | None = None) -> None:
    """Run the test server in the foreground; a signal stops it cleanly."""
    parser = argparse.ArgumentParser(
        prog="python -m decider.stores.esdb.testserver",
        description="EventStoreDB-compatible gRPC test server (insecure, single node).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2113, help="port to bind (default 2113)")
    parser.add_argument("--file", default=None, help="keep the log in this append-only file")
    parser.add_argument(
        "--workers",
        type=int,
        default=512,
        help="threads serving calls; each open subscription holds one (default 512)",
    )
    parser.add_argument(
        "--kurrentdb-version",
        choices=("24.10", "25.1", "26.1"),
        default="26.1",
        help="the node it acts as: 24.10 serves no v2 call, 25.1 AppendSession only (default 26.1)",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server = EsdbTestServer(
        host=args.host,
        port=args.port,
        path=args.file,
        max_workers=args.workers,
        append_session=args.kurrentdb_version != "24.10",
        append_records=args.kurrentdb_version == "26.1",
    ).start()
    print(f"EventStoreDB test server listening: {server.uri}", flush=True)
    try:
        stop.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
