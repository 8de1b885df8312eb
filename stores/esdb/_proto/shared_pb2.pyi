from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UUID(_message.Message):
    __slots__ = ("structured", "string")
    class Structured(_message.Message):
        __slots__ = ("most_significant_bits", "least_significant_bits")
        MOST_SIGNIFICANT_BITS_FIELD_NUMBER: _ClassVar[int]
        LEAST_SIGNIFICANT_BITS_FIELD_NUMBER: _ClassVar[int]
        most_significant_bits: int
        least_significant_bits: int
        def __init__(self, most_significant_bits: _Optional[int] = ..., least_significant_bits: _Optional[int] = ...) -> None: ...
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    STRING_FIELD_NUMBER: _ClassVar[int]
    structured: UUID.Structured
    string: str
    def __init__(self, structured: _Optional[_Union[UUID.Structured, _Mapping]] = ..., string: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StreamIdentifier(_message.Message):
    __slots__ = ("stream_name",)
    STREAM_NAME_FIELD_NUMBER: _ClassVar[int]
    stream_name: bytes
    def __init__(self, stream_name: _Optional[bytes] = ...) -> None: ...

class AllStreamPosition(_message.Message):
    __slots__ = ("commit_position", "prepare_position")
    COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
    PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
    commit_position: int
    prepare_position: int
    def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...

class WrongExpectedVersion(_message.Message):
    __slots__ = ("current_stream_revision", "current_no_stream", "expected_stream_position", "expected_any", "expected_stream_exists", "expected_no_stream")
    CURRENT_STREAM_REVISION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_NO_STREAM_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_ANY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_NO_STREAM_FIELD_NUMBER: _ClassVar[int]
    current_stream_revision: int
    current_no_stream: _empty_pb2.Empty
    expected_stream_position: int
    expected_any: _empty_pb2.Empty
    expected_stream_exists: _empty_pb2.Empty
    expected_no_stream: _empty_pb2.Empty
    def __init__(self, current_stream_revision: _Optional[int] = ..., current_no_stream: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., expected_stream_position: _Optional[int] = ..., expected_any: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., expected_stream_exists: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., expected_no_stream: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ...) -> None: ...

class AccessDenied(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StreamDeleted(_message.Message):
    __slots__ = ("stream_identifier",)
    STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    stream_identifier: StreamIdentifier
    def __init__(self, stream_identifier: _Optional[_Union[StreamIdentifier, _Mapping]] = ...) -> None: ...

class Timeout(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Unknown(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InvalidTransaction(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MaximumAppendSizeExceeded(_message.Message):
    __slots__ = ("maxAppendSize",)
    MAXAPPENDSIZE_FIELD_NUMBER: _ClassVar[int]
    maxAppendSize: int
    def __init__(self, maxAppendSize: _Optional[int] = ...) -> None: ...

class BadRequest(_message.Message):
    __slots__ = ("message",)
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: str
    def __init__(self, message: _Optional[str] = ...) -> None: ...
