"""A separate OS process that appends to a store (run by the several-processes tests).

Usage: ``python store_worker.py URI NAME COUNT``. It opens the store by URI, prints ``ready``,
waits for a line on stdin (so that several workers start together), then makes COUNT
single-event appends, half a millisecond apart: every third one to the shared stream
``shared`` (retrying on conflicts with the revision the conflict reports), the others to its
own stream ``own-NAME``. It finally prints one JSON line: the ids it wrote to each stream, in
order.
"""

from __future__ import annotations

import json
import sys
import threading
import uuid

from decider.stores import NO_STREAM, ExpectedRevision, NewEvent, WrongExpectedVersion, open_store


def main(uri: str, name: str, count: int) -> None:
    store = open_store(uri)
    print("ready", flush=True)
    sys.stdin.readline()
    written: dict[str, list[str]] = {"shared": [], f"own-{name}": []}
    shared: ExpectedRevision = NO_STREAM
    own: ExpectedRevision = NO_STREAM
    think = threading.Event()
    for index in range(count):
        # Think time between appends, as a real writer has: without it one process may hold
        # the (unfair) write lock almost all the time and the other mostly back off.
        think.wait(0.0005)
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
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
