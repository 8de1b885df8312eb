from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StreamTombstonedErrorDetails(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class StreamRevisionConflictErrorDetails(_message.Message):
    __slots__ = ("stream", "expected_revision", "actual_revision")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_REVISION_FIELD_NUMBER: _ClassVar[int]
    stream: str
    expected_revision: int
    actual_revision: int
    def __init__(self, stream: _Optional[str] = ..., expected_revision: _Optional[int] = ..., actual_revision: _Optional[int] = ...) -> None: ...

class AppendRecordSizeExceededErrorDetails(_message.Message):
    __slots__ = ("stream", "record_id", "size", "max_size")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_SIZE_FIELD_NUMBER: _ClassVar[int]
    stream: str
    record_id: str
    size: int
    max_size: int
    def __init__(self, stream: _Optional[str] = ..., record_id: _Optional[str] = ..., size: _Optional[int] = ..., max_size: _Optional[int] = ...) -> None: ...

class AppendTransactionSizeExceededErrorDetails(_message.Message):
    __slots__ = ("size", "max_size")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    max_size: int
    def __init__(self, size: _Optional[int] = ..., max_size: _Optional[int] = ...) -> None: ...

class StreamAlreadyInAppendSessionErrorDetails(_message.Message):
    __slots__ = ("stream",)
    STREAM_FIELD_NUMBER: _ClassVar[int]
    stream: str
    def __init__(self, stream: _Optional[str] = ...) -> None: ...

class AppendConsistencyViolationErrorDetails(_message.Message):
    __slots__ = ("violations",)
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    violations: _containers.RepeatedCompositeFieldContainer[ConsistencyViolation]
    def __init__(self, violations: _Optional[_Iterable[_Union[ConsistencyViolation, _Mapping]]] = ...) -> None: ...

class ConsistencyViolation(_message.Message):
    __slots__ = ("check_index", "stream_state")
    class StreamStateViolation(_message.Message):
        __slots__ = ("stream", "expected_state", "actual_state")
        STREAM_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_STATE_FIELD_NUMBER: _ClassVar[int]
        ACTUAL_STATE_FIELD_NUMBER: _ClassVar[int]
        stream: str
        expected_state: int
        actual_state: int
        def __init__(self, stream: _Optional[str] = ..., expected_state: _Optional[int] = ..., actual_state: _Optional[int] = ...) -> None: ...
    CHECK_INDEX_FIELD_NUMBER: _ClassVar[int]
    STREAM_STATE_FIELD_NUMBER: _ClassVar[int]
    check_index: int
    stream_state: ConsistencyViolation.StreamStateViolation
    def __init__(self, check_index: _Optional[int] = ..., stream_state: _Optional[_Union[ConsistencyViolation.StreamStateViolation, _Mapping]] = ...) -> None: ...
