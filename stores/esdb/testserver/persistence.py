"""Optional persistence of the test server's log: an append-only file of JSON lines.

One line per record, written (and flushed) when the record is committed, so a demo can stop
the server and start it again on the same file. A torn last line (the process died mid-write)
is dropped on load and cut off the file.

WARNING: lines are flushed to the operating system, not fsynced: a machine crash may lose the
last writes. This is a test server.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from decider.stores.esdb.testserver.log import Record


def encode(record: Record) -> str:
    """One record as one JSON line (with the newline)."""
    return (
        json.dumps(
            {
                "p": record.position,
                "s": record.stream,
                "r": record.revision,
                "i": record.id,
                "t": record.type,
                "c": record.content_type,
                "d": base64.b64encode(record.data).decode(),
                "m": base64.b64encode(record.metadata).decode(),
                "ts": record.created,
            },
            separators=(",", ":"),
        )
        + "\n"
    )


def decode(line: str) -> Record:
    """The record of one JSON line; raises ``ValueError`` (or ``KeyError``) if it is torn."""
    fields = json.loads(line)
    return Record(
        position=int(fields["p"]),
        stream=str(fields["s"]),
        revision=int(fields["r"]),
        id=str(fields["i"]),
        type=str(fields["t"]),
        content_type=str(fields["c"]),
        data=base64.b64decode(fields["d"]),
        metadata=base64.b64decode(fields["m"]),
        created=int(fields["ts"]),
    )


class LogFile:
    """An append-only record file: :meth:`load` it once, then :meth:`write` each commit."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None

    def load(self) -> list[Record]:
        """Every complete record of the file (none if it does not exist); cuts a torn tail."""
        if not self.path.exists():
            return []
        records: list[Record] = []
        good_bytes = 0
        with self.path.open("rb") as file:
            for raw in file:
                if not raw.endswith(b"\n"):
                    break
                try:
                    records.append(decode(raw.decode("utf-8")))
                except (ValueError, KeyError):
                    break
                good_bytes += len(raw)
        if good_bytes != self.path.stat().st_size:
            with self.path.open("r+b") as file:
                file.truncate(good_bytes)
        return records

    def write(self, records: Sequence[Record]) -> None:
        """Append records and flush them (one write call per commit)."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write("".join(encode(r) for r in records))
        self._file.flush()

    def close(self) -> None:
        """Close the file; a later :meth:`write` reopens it."""
        if self._file is not None:
            self._file.close()
            self._file = None
