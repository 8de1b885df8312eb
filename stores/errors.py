"""The errors every store raises, whatever its backend.

Each adapter maps its driver's errors to these in one place (``raise ... from exc``),
so processors handle one tree::

    StoreError
    ├── WrongExpectedVersion   the stream is not at the revision the caller expected
    ├── StreamDeleted          the stream was deleted (tombstoned) and cannot be written or read
    ├── StoreUnavailable       the backend cannot be reached or timed out; retrying may help
    ├── PermanentStoreError    the store rejects what was written for good (a name it cannot hold)
    ├── CorruptEvent           a stored event cannot be decoded (bad JSON, unknown type)
    ├── PermanentStoreError    the store can never accept this request; retrying cannot help
    │   └── InvalidName        a stream name, event type or checkpoint name the store cannot hold
    ├── UnsupportedStoreURI    a store URI with an unknown scheme or malformed parts
    └── StoreNotFound          opened with create=False where no store exists (a mistyped name)

Transient and permanent: :class:`StoreUnavailable` says *retry later*;
:class:`PermanentStoreError` says *the request itself is at fault*: a processor skips the input
that led to it. Messages never hold a password (:func:`decider.stores.redact.redact_uri`).
"""

from __future__ import annotations

from decider.stores.redact import redact_text, redact_uri


class StoreError(Exception):
    """Base class of every error a store raises."""


class WrongExpectedVersion(StoreError):
    """An append's expected revision did not match the stream's actual revision.

    ``actual`` is the stream's last revision, or ``None`` when the stream does not exist.
    Nothing of the append was written.
    """

    def __init__(self, stream: str, expected: object, actual: int | None) -> None:
        self.stream = stream
        self.expected = expected
        self.actual = actual
        shown = "no stream" if actual is None else f"revision {actual}"
        super().__init__(
            f"wrong expected version for stream {stream!r}: expected {expected}, actual {shown}"
        )


class StreamDeleted(StoreError):
    """The stream was deleted for good; it can be neither read nor written."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        super().__init__(f"stream {stream!r} is deleted")


class StoreUnavailable(StoreError):
    """The backend could not be reached, or did not answer in time. Retrying may succeed."""


class CorruptEvent(StoreError):
    """A stored event could not be decoded.

    It names the stream and revision, so the event can be found and repaired; the other
    events of the stream and of the log stay readable.
    """

    def __init__(self, stream: str, revision: int, reason: str) -> None:
        self.stream = stream
        self.revision = revision
        self.reason = reason
        super().__init__(f"corrupt event at {stream!r} revision {revision}: {reason}")


class PermanentStoreError(StoreError):
    """The store rejected a request that it will reject every time (the data is at fault).

    Nothing of the request was written. Retrying the same request cannot succeed; a processor
    skips the input that led to it.
    """


class InvalidName(PermanentStoreError):
    """A name the store cannot hold: ``kind`` is ``"stream name"``, ``"event type"`` or
    ``"checkpoint name"``; ``reason`` says which limit it breaks (see docs/stores.md).

    Raised before anything is written or read; the message shows the name shortened.
    """

    def __init__(self, kind: str, name: str, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.reason = reason
        shown = repr(name) if len(name) <= 80 else repr(name[:60]) + f"... ({len(name)} chars)"
        super().__init__(f"invalid {kind} {shown}: {reason}")


class UnsupportedStoreURI(StoreError, ValueError):
    """A store URI whose scheme is unknown or whose parts are malformed.

    ``uri`` and the message hold the URI with its secrets hidden
    (:func:`~decider.stores.redact.redact_uri`), and so does ``reason``.
    """

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = redact_uri(uri)
        self.reason = redact_text(reason, uri)
        super().__init__(f"unsupported store URI {self.uri!r}: {self.reason}")


class StoreNotFound(StoreError, LookupError):
    """A store opened with ``create=False`` (what a read-only command does) where none exists:
    no SQLite file, no PostgreSQL schema or no tables in it. Nothing was created.

    The message names where it looked, without a password.
    """
