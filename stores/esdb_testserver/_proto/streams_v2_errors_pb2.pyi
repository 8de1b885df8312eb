from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

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
