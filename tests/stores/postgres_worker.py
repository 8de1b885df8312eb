"""A separate OS process that appends to a PostgreSQL store (run by test_postgres_processes.py).

Usage: ``python postgres_worker.py URI SCHEMA NAME COUNT``. It opens the store, prints
``ready``, waits for a line on stdin (so that several workers start together), then makes COUNT
single-event appends: every third one to the shared stream ``shared`` (retrying on conflicts
with the revision the conflict reports), the others to its own stream ``own-NAME``. It finally
prints one JSON line: the ids it wrote to each stream, in order.
"""

from __future__ import annotations

import json
import sys
import uuid

from stores import NO_STREAM, ExpectedRevision, NewEvent, WrongExpectedVersion
from stores.postgres import PostgresEventStore


def main(uri: str, schema: str, name: str, count: int) -> None:
    store = PostgresEventStore(uri, schema=schema, synchronous_commit="off")
    print("ready", flush=True)
    sys.stdin.readline()
    written: dict[str, list[str]] = {"shared": [], f"own-{name}": []}
    shared: ExpectedRevision = NO_STREAM
    own: ExpectedRevision = NO_STREAM
    for index in range(count):
        event = NewEvent(id=uuid.uuid4(), type="Worked", data=json.dumps([name, index]).encode())
        if index % 3 == 0:
            while True:
                try:
                    result = store.append("shared", [event], shared)
                except WrongExpectedVersion as conflict:
                    shared = NO_STREAM if conflict.actual is None else conflict.actual
                    continue
                shared = result.next_expected_revision
                written["shared"].append(str(event.id))
                break
        else:
            own = store.append(f"own-{name}", [event], own).next_expected_revision
            written[f"own-{name}"].append(str(event.id))
    store.close()
    print(json.dumps(written), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
