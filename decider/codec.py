"""The codec: messages and workflow events to and from (type name, JSON bytes, metadata JSON).

Stored type names are the message's registered name, and for a workflow event the event's
kind and the message's name joined by a colon, so a reader of the raw log sees both::

    Began                         {}
    InitiatedBy:fines.PoliceReportPublished   {...the message...}
    Sent:fines.GenerateTrafficFineSystemNumber {...the message...}
    Scheduled:orders.PaymentTimedOut          {"after": 900.0, "message": {...}}
    Ignored:fines.PoliceReportPublished       {"reason": "...", "message": {...}}
    Completed                     {}
    Failed                        {"reason": "..."}
    Cancelled                     {"reason": "..."}

This module is the one owner of that grammar (written in :mod:`decider._stored_types`, and
re-exported here): :func:`stored_type` builds a stored type name, :func:`parse_type` splits
one, :func:`kind_prefixes` gives the type prefixes a reader of some kinds subscribes with, and
:class:`Codec` decodes messages, workflow events, a ``Scheduled`` event's timer and metadata.
The kinds themselves are :class:`~decider.kinds.Kind` (re-exported here), the one vocabulary
every other module compares and filters with.
Nothing else parses a stored type name or metadata JSON. :func:`describe` (from
:mod:`decider._describe`) words a failure as one line.

Only registered types decode: a type name found in data is looked up in the registry and
never imported. Every decode raises :class:`DecodeError` (naming the type and the reason) for
any failure, a ``RecursionError`` from deeply nested JSON included. An upcaster turns an old
stored shape into the current one before it is structured.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import attrs

from decider import _json
from decider._describe import describe, format_traceback
from decider._stored_types import (
    BEGAN,
    COMMAND_KINDS,
    COMPLETED,
    EVENT_KINDS,
    KIND_SEPARATOR,
    LIFECYCLE_TYPES,
    TIMER_KINDS,
    event_kind,
    kind_prefixes,
    lifecycle_of_type,
    parse_type,
    stored_type,
)
from decider._strict import FieldTypeError, field_errors, strict_converter
from decider.errors import DeciderError, DecodeError, UnknownMessageType
from decider.events import (
    Began,
    Cancelled,
    Completed,
    Failed,
    Ignored,
    InitiatedBy,
    Published,
    Received,
    Replied,
    Scheduled,
    Sent,
    WorkflowEvent,
)
from decider.kinds import Kind
from decider.messages import REGISTRY, Envelope, MessageRegistry, Metadata

__all__ = [
    "BEGAN",
    "COMMAND_KINDS",
    "COMPLETED",
    "EVENT_KINDS",
    "KIND_SEPARATOR",
    "LIFECYCLE_TYPES",
    "TIMER_KINDS",
    "Codec",
    "Kind",
    "Timer",
    "describe",
    "describe_fields",
    "format_traceback",
    "event_kind",
    "kind_prefixes",
    "lifecycle_of_type",
    "parse_type",
    "stored_type",
    "trace_of",
]

JSON: TypeAlias = dict[str, Any]
Upcaster: TypeAlias = Callable[[JSON], JSON]

_WRAPPING: dict[str, type[Any]] = {
    Kind.INITIATED_BY: InitiatedBy,
    Kind.RECEIVED: Received,
    Kind.REPLIED: Replied,
    Kind.SENT: Sent,
    Kind.PUBLISHED: Published,
}
_KIND_OF: dict[type[Any], str] = {cls: kind for kind, cls in _WRAPPING.items()}
_EMPTY = b"{}"
_OPTIONAL_TEXT = ("correlation_id", "causation_id", "workflow_version", "traceparent", "tracestate")
"""The metadata fields that are absent or a string (absent ones decode as ``None``)."""
_TEXT_FIELDS = frozenset({"message_id", *_OPTIONAL_TEXT})
"""The fields of metadata that needs no check but each value's type (every one a string)."""
_REUSES = b'"reuses"'
_EMPTY_ID = b'{"message_id":""'
"""How the metadata of an empty message id starts (:meth:`Codec.metadata_after_id`)."""
_PLAIN_ID = re.compile(r"[0-9A-Za-z_.-]*")
"""Message ids JSON writes as they are, between quotes."""
_ENDINGS: dict[str, type[Failed | Cancelled]] = {Kind.FAILED: Failed, Kind.CANCELLED: Cancelled}


def describe_fields(exc: BaseException, limit: int = 500) -> str:
    """The reason a JSON object does not fit a message, one clause per field, at most
    ``limit`` characters.

    >>> import attrs
    >>> @attrs.frozen
    ... class Stay:
    ...     hotel: str
    ...     nights: int
    >>> try:
    ...     Codec().converter.structure({"nights": 2.7, "confirm_withn": 5}, Stay)
    ... except Exception as exc:
    ...     print(describe_fields(exc))
    missing field: hotel; nights: expected an integer, got 2.7; unknown field: confirm_withn
    """
    try:
        text = "; ".join(field_errors(exc)) or describe(exc)
    except Exception:  # a value whose description fails: the exception's own line
        text = describe(exc)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _timedelta(value: Any, _: Any) -> timedelta:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise FieldTypeError(f"expected a number of seconds, got {value!r}")


@attrs.frozen
class Timer:
    """What a ``Scheduled`` event holds: the message due after a delay, as stored JSON bytes.

    The message is not structured: the timer processor copies it, byte for byte, when due.
    """

    message_type: str
    after: timedelta
    message: bytes


def trace_of(metadata: bytes) -> tuple[str, str | None] | None:
    """The W3C ``traceparent`` and ``tracestate`` in metadata JSON bytes; ``None`` if there
    is no trace context, or the metadata cannot be read (lenient, like
    :meth:`Codec.causation_of`: a bad one is found when the event is decoded).

    >>> trace_of(b'{"message_id": "m", "traceparent": "00-ab-cd-01"}')
    ('00-ab-cd-01', None)
    """
    if b"traceparent" not in metadata:
        return None  # the common case when nothing traces: no JSON parsed
    try:
        doc = _json.loads(metadata)
        parent, state = doc.get("traceparent"), doc.get("tracestate")
    except Exception:  # any bad metadata: not JSON, not an object, too deep
        return None
    if not isinstance(parent, str):
        return None
    return parent, state if isinstance(state, str) else None


class Codec:
    """Encodes and decodes the messages of one registry and the workflow events over them.

    ``encode_*`` raise :class:`UnknownMessageType` for an unregistered message;
    ``decode_*`` raise :class:`DecodeError` (naming the type and the reason) for bytes that
    are not valid JSON, do not fit the type, or name a type that is not registered.
    """

    def __init__(self, registry: MessageRegistry = REGISTRY) -> None:
        self.registry = registry
        self.converter = strict_converter()  # pydantic models too, besides attrs and dataclasses
        self.converter.register_unstructure_hook(timedelta, timedelta.total_seconds)
        self.converter.register_structure_hook(timedelta, _timedelta)
        self._upcasters: dict[str, tuple[str, Upcaster]] = {}

    def add_upcaster(self, stored_name: str, upcast: Upcaster, *, to: str | None = None) -> None:
        """Upgrade stored messages of type ``stored_name`` with ``upcast`` when decoding.

        ``upcast`` receives the stored JSON object and returns the current one; ``to`` names
        the registered type it then decodes as (default: the same name). Upcasters chain:
        ``v1 -> v2 -> current``.

        WARNING: an upcaster registered under the same name as its target also runs on data
        already in the current shape, so it must be idempotent; prefer versioned names
        (``x.v1`` -> ``x.v2``).
        """
        self._upcasters[stored_name] = (to or stored_name, upcast)

    # -- messages -------------------------------------------------------------------------

    def encode_message(self, message: object) -> tuple[str, bytes]:
        """A registered message as (type name, JSON bytes)."""
        name = self.registry.name_of(type(message))
        return name, self._dumps(self.converter.unstructure(message))

    def decode_message(self, type_name: str, data: bytes) -> Any:
        """The message of a stored type name and JSON bytes (a plain message, no event kind)."""
        try:
            if type_name in (BEGAN, COMPLETED) or (
                KIND_SEPARATOR in type_name and event_kind(type_name) is not None
            ):
                raise DecodeError(type_name, "a workflow event, not a message")
            try:
                doc = _json.loads(data)
            except Exception:
                doc = None
            if type(doc) is not dict:
                doc = self._loads(type_name, data)  # raises, saying why
            return self._structure_message(type_name, doc)
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(type_name, describe(exc)) from exc

    def encode_data(self, message: object) -> bytes:
        """A message's JSON bytes, whether or not its class is registered (the engine's own
        messages, for an app whose registry does not hold them)."""
        return self._dumps(self.converter.unstructure(message))

    def decode_data(self, cls: type[Any], type_name: str, data: bytes) -> Any:
        """The message of class ``cls`` in JSON bytes stored as ``type_name``, whether or not
        ``cls`` is registered; :class:`DecodeError` (naming ``type_name``) if it does not fit."""
        try:
            doc = self._loads(type_name, data)
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(type_name, describe(exc)) from exc
        return self._structure(type_name, doc, cls)

    def encode_envelope(self, envelope: Envelope[Any]) -> tuple[str, bytes, bytes]:
        """A message and its metadata as (type name, JSON bytes, metadata JSON bytes)."""
        type_name, data = self.encode_message(envelope.message)
        return type_name, data, self.encode_metadata(envelope.metadata)

    def decode_envelope(self, type_name: str, data: bytes, metadata: bytes) -> Envelope[Any]:
        """The message and metadata of a stored type name, JSON bytes and metadata JSON."""
        return Envelope(self.decode_message(type_name, data), self.decode_metadata(metadata))

    # -- workflow events -----------------------------------------------------------------

    def encode_event(self, event: WorkflowEvent[Any, Any]) -> tuple[str, bytes]:
        """A workflow event as (stored type name, JSON bytes)."""
        kind = _KIND_OF.get(type(event))
        if kind is not None:  # a message it carries (Sent, Received, ...): most events
            message = event.message  # type: ignore[union-attr]  # each kind of _KIND_OF has one
            name, body = self._unstructure(message)
            return stored_type(kind, name), self._dumps(body)
        if isinstance(event, Began):
            return BEGAN, _EMPTY
        if isinstance(event, Completed):
            return COMPLETED, _EMPTY
        if isinstance(event, Failed | Cancelled):
            ending = Kind.FAILED if isinstance(event, Failed) else Kind.CANCELLED
            return ending.value, self._dumps({"reason": event.reason})
        if isinstance(event, Scheduled):
            name, body = self._unstructure(event.message)
            doc: JSON = {"after": event.after.total_seconds(), "message": body}
            return stored_type(Kind.SCHEDULED, name), self._dumps(doc)
        if isinstance(event, Ignored):
            name, body = self._unstructure(event.message)
            doc = {"reason": event.reason, "message": body}
            return stored_type(Kind.IGNORED, name), self._dumps(doc)
        raise DeciderError(f"{event!r} is not a workflow event")

    def decode_event(self, type_name: str, data: bytes) -> WorkflowEvent[Any, Any]:
        """The workflow event of a stored type name and JSON bytes."""
        try:
            return self._decode_event(type_name, data)
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(type_name, describe(exc)) from exc

    def decode_timer(self, type_name: str, data: bytes) -> Timer:
        """The timer a stored ``Scheduled`` event holds, its message left as JSON bytes."""
        try:
            kind, name = parse_type(type_name)
            if kind not in TIMER_KINDS or not name:
                raise DecodeError(type_name, "not a Scheduled event type")
            doc = self._loads(type_name, data)
            after = self._field(type_name, doc, "after")
            body = self._field(type_name, doc, "message")
            number = isinstance(after, int | float) and not isinstance(after, bool)
            if not number or not 0 <= after < 1e9:
                raise DecodeError(
                    type_name, f"'after' must be a non-negative number of seconds, got {after!r}"
                )
            if not isinstance(body, dict):
                raise DecodeError(type_name, "'message' must be a JSON object")
            return Timer(name, timedelta(seconds=after), _json.dumps_plain(body))
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(type_name, describe(exc)) from exc

    def _decode_event(self, type_name: str, data: bytes) -> WorkflowEvent[Any, Any]:
        kind, name = parse_type(type_name)
        if type_name == BEGAN:
            return Began()
        if type_name == COMPLETED:
            return Completed()
        ending = _ENDINGS.get(type_name)
        if ending is not None:
            reason = self._field(type_name, self._loads(type_name, data), "reason")
            if not isinstance(reason, str):
                raise DecodeError(type_name, f"'reason' must be a string, got {reason!r}")
            return ending(reason)
        if kind is None:
            raw_kind, separator, _ = type_name.partition(KIND_SEPARATOR)
            if separator:
                raise DecodeError(type_name, f"unknown workflow event kind {raw_kind!r}")
        if kind is None or not name:
            raise DecodeError(type_name, "not a workflow event type")
        doc = self._loads(type_name, data)
        if kind == Kind.SCHEDULED:
            after, body = (
                self._field(type_name, doc, "after"),
                self._field(type_name, doc, "message"),
            )
            if not isinstance(after, int | float) or after < 0:
                raise DecodeError(
                    type_name, f"'after' must be a non-negative number, got {after!r}"
                )
            return Scheduled(timedelta(seconds=after), self._structure_message(name, body))
        if kind == Kind.IGNORED:
            reason, body = (
                self._field(type_name, doc, "reason"),
                self._field(type_name, doc, "message"),
            )
            return Ignored(self._structure_message(name, body), str(reason))
        cls = _WRAPPING.get(kind)
        if cls is None:
            raise DecodeError(type_name, f"unknown workflow event kind {kind!r}")
        wrapped: WorkflowEvent[Any, Any] = cls(self._structure_message(name, doc))
        return wrapped

    # -- metadata --------------------------------------------------------------------------

    def encode_metadata(self, metadata: Metadata) -> bytes:
        """Metadata as JSON bytes; absent fields are left out."""
        return self.metadata_bytes(
            metadata.message_id,
            correlation_id=metadata.correlation_id,
            causation_id=metadata.causation_id,
            recorded_at=metadata.recorded_at,
            workflow_version=metadata.workflow_version,
            traceparent=metadata.traceparent,
            tracestate=metadata.tracestate,
        )

    def metadata_bytes(
        self,
        message_id: str,
        *,
        correlation_id: str | None = None,
        causation_id: str | None = None,
        recorded_at: datetime | None = None,
        workflow_version: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> bytes:
        """The bytes :meth:`encode_metadata` writes for ``Metadata`` of these fields, without
        building it (the processors write one for every event).

        >>> Codec().metadata_bytes("m-1", causation_id="c-1")
        b'{"message_id":"m-1","causation_id":"c-1"}'
        """
        doc: JSON = {"message_id": message_id}
        if correlation_id is not None:
            doc["correlation_id"] = correlation_id
        if causation_id is not None:
            doc["causation_id"] = causation_id
        if recorded_at is not None:
            doc["recorded_at"] = recorded_at.isoformat()
        if workflow_version is not None:
            doc["workflow_version"] = workflow_version
        if traceparent is not None:
            doc["traceparent"] = traceparent
            if tracestate:
                doc["tracestate"] = tracestate
        for value in doc.values():
            if type(value) is not str:  # json's bytes, or its TypeError
                return _json.dumps(doc)
        return _json.dumps_strings(doc)

    def metadata_after_id(
        self,
        *,
        correlation_id: str | None = None,
        causation_id: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> bytes:
        """What :meth:`metadata_bytes` writes after the message id for these fields, made once
        for the events of one decision (:meth:`metadata_of_id` joins each event's id to it).

        >>> codec = Codec()
        >>> after = codec.metadata_after_id(correlation_id="wf-1", causation_id="m-1")
        >>> codec.metadata_of_id("a-1", after) == codec.metadata_bytes(
        ...     "a-1", correlation_id="wf-1", causation_id="m-1"
        ... )
        True
        """
        doc = self.metadata_bytes(
            "",
            correlation_id=correlation_id,
            causation_id=causation_id,
            traceparent=traceparent,
            tracestate=tracestate,
        )
        assert doc.startswith(_EMPTY_ID), doc  # message_id is always the first field
        return doc[len(_EMPTY_ID) :]

    @staticmethod
    def metadata_of_event_id(new_id: uuid.UUID, after_id: bytes) -> bytes:
        """:meth:`metadata_of_id` of an event id's text (hex digits and dashes: no escape
        needed, none checked)."""
        # str(new_id), written in place (no call of UUID.__str__ and its % formatting).
        h = new_id.int.to_bytes(16, "big").hex()
        text = "-".join((h[:8], h[8:12], h[12:16], h[16:20], h[20:]))
        return b'{"message_id":"' + text.encode() + b'"' + after_id

    @staticmethod
    def metadata_of_id(message_id: str, after_id: bytes) -> bytes:
        """:meth:`metadata_bytes` of ``message_id`` and the fields of ``after_id``
        (:meth:`metadata_after_id`), for a ``message_id`` JSON writes as it is (a derived id:
        hex digits and dashes; anything else is written by :meth:`metadata_bytes`)."""
        if not _PLAIN_ID.fullmatch(message_id):
            return b'{"message_id":' + _json.dumps_strings({"": message_id})[4:-1] + after_id
        return b'{"message_id":"' + message_id.encode() + b'"' + after_id

    def decode_metadata(self, data: bytes) -> Metadata:
        """Metadata from JSON bytes."""
        # The common case (what the processors write: text fields only, each a str) with no
        # call between this and the JSON decoder; anything else (or any failure) takes the
        # checked path below, which says why it fails.
        try:
            doc = _json.loads(data)
            if type(doc) is dict and doc.keys() <= _TEXT_FIELDS and "message_id" in doc:
                for value in doc.values():
                    if type(value) is not str:
                        break
                else:
                    return Metadata(**doc)
        except Exception:  # the checked path says why
            pass
        try:
            return self._decode_metadata(data)
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError("metadata", describe(exc)) from exc

    def causation_of(self, metadata: bytes) -> str | None:
        """The causation id in metadata JSON bytes; ``None`` if absent or unreadable.

        For the instance streams the processors wrote themselves, read to know which inputs an
        instance has handled: lenient, because a bad one is found when its event is decoded.
        """
        if not metadata:
            return None
        try:
            cause = _json.loads(metadata).get("causation_id")
        except Exception:  # any bad metadata: not JSON, not an object, too deep
            return None
        return cause if isinstance(cause, str) else None

    def reused_of(self, metadata: bytes) -> str | None:
        """The id of the command or timer of an earlier generation of the instance whose effect
        the event with this metadata reuses (``"reuses"``, written by a fork:
        :mod:`decider.processors.client.forking`); ``None`` if none, or unreadable.

        >>> Codec().reused_of(b'{"message_id":"m","reuses":"c-1"}'), Codec().reused_of(b"{}")
        ('c-1', None)
        """
        if _REUSES not in metadata:
            # Every event never forked: one search of the bytes, no JSON parsed. Not a look at
            # the first bytes: a store may give the fields back in another order (KurrentDB's
            # record properties).
            return None
        try:
            reused = _json.loads(metadata).get("reuses")
        except Exception:  # any bad metadata: not JSON, not an object, too deep
            return None
        return reused if isinstance(reused, str) else None

    def with_reuse(self, metadata: bytes, reused: str) -> bytes:
        """Stored metadata JSON that also says the event reuses the effect of ``reused``
        (:meth:`reused_of`); every other field kept.

        >>> Codec().reused_of(Codec().with_reuse(b'{"message_id": "m"}', "c-1"))
        'c-1'
        """
        doc = _json.loads(metadata) if metadata else {}
        doc["reuses"] = reused
        return _json.dumps_plain(doc)

    def with_ids(self, metadata: bytes, message_id: str, causation_id: str) -> bytes:
        """Stored metadata JSON with a new message id and causation id, every other field kept
        as it was (fields :class:`~decider.Metadata` does not hold included); metadata that is
        empty or unreadable becomes just the two ids."""
        try:
            doc = _json.loads(metadata) if metadata else {}
        except Exception:  # not JSON, or too deep: replaced by the ids alone
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        doc.update(message_id=message_id, causation_id=causation_id)
        return _json.dumps_plain(doc)

    def _decode_metadata(self, data: bytes) -> Metadata:
        # The common case (text fields only, each a str) is decode_metadata's own, before this.
        doc = self._loads("metadata", data)
        if not isinstance(doc.get("message_id"), str):
            raise DecodeError("metadata", "'message_id' is missing or not a string")
        for key in _OPTIONAL_TEXT:
            if doc.get(key) is not None and not isinstance(doc[key], str):
                raise DecodeError("metadata", f"{key!r} must be a string, got {doc[key]!r}")
        recorded = doc.get("recorded_at")
        try:
            return Metadata(
                message_id=doc["message_id"],
                correlation_id=doc.get("correlation_id"),
                causation_id=doc.get("causation_id"),
                recorded_at=datetime.fromisoformat(recorded) if recorded else None,
                workflow_version=doc.get("workflow_version"),
                traceparent=doc.get("traceparent"),
                tracestate=doc.get("tracestate"),
            )
        except (TypeError, ValueError) as exc:
            raise DecodeError("metadata", str(exc)) from exc

    # -- internals -------------------------------------------------------------------------

    def _unstructure(self, message: object) -> tuple[str, Any]:
        return self.registry.name_of(type(message)), self.converter.unstructure(message)

    def _structure_message(self, type_name: str, doc: Any) -> Any:
        seen: set[str] = set()
        while type_name in self._upcasters and type_name not in seen:
            seen.add(type_name)
            if not isinstance(doc, dict):
                raise DecodeError(type_name, "expected a JSON object")
            target, upcast = self._upcasters[type_name]
            try:
                doc = upcast(doc)
            except Exception as exc:
                raise DecodeError(
                    type_name, f"upcasting to {target!r} failed: {describe(exc)}"
                ) from exc
            type_name = target
        try:
            cls = self.registry.class_of(type_name)
        except UnknownMessageType:
            raise DecodeError(type_name, "the type is not registered") from None
        if not isinstance(doc, dict):
            raise DecodeError(type_name, "expected a JSON object")
        return self._structure(type_name, doc, cls)

    def _structure(self, type_name: str, doc: Any, cls: type[Any]) -> Any:
        """``doc`` structured strictly as ``cls``; a :class:`DecodeError` whose reason names
        each field that does not fit, in plain words (``missing field: hotel``)."""
        try:
            return self.converter.structure(doc, cls)
        except RecursionError as exc:
            raise DecodeError(type_name, "nested too deeply") from exc
        except Exception as exc:
            raise DecodeError(type_name, describe_fields(exc)) from exc

    @staticmethod
    def _field(type_name: str, doc: JSON, key: str) -> Any:
        if key not in doc:
            raise DecodeError(type_name, f"the field {key!r} is missing")
        return doc[key]

    @staticmethod
    def _dumps(doc: Any) -> bytes:
        # What the converter made may hold what only msgspec writes: json's bytes or error.
        return _json.dumps_converted(doc)

    @staticmethod
    def _loads(type_name: str, data: bytes) -> JSON:
        try:
            doc = _json.loads(data)
        except RecursionError as exc:
            raise DecodeError(type_name, "invalid JSON: nested too deeply") from exc
        except Exception as exc:  # ValueError, UnicodeDecodeError, TypeError for a non-bytes value
            raise DecodeError(type_name, f"invalid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise DecodeError(type_name, "expected a JSON object")
        return doc
