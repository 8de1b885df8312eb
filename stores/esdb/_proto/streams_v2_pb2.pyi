from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchemaFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEMA_FORMAT_UNSPECIFIED: _ClassVar[SchemaFormat]
    SCHEMA_FORMAT_JSON: _ClassVar[SchemaFormat]
    SCHEMA_FORMAT_PROTOBUF: _ClassVar[SchemaFormat]
    SCHEMA_FORMAT_AVRO: _ClassVar[SchemaFormat]
    SCHEMA_FORMAT_BYTES: _ClassVar[SchemaFormat]
SCHEMA_FORMAT_UNSPECIFIED: SchemaFormat
SCHEMA_FORMAT_JSON: SchemaFormat
SCHEMA_FORMAT_PROTOBUF: SchemaFormat
SCHEMA_FORMAT_AVRO: SchemaFormat
SCHEMA_FORMAT_BYTES: SchemaFormat

class AppendRecordsRequest(_message.Message):
    __slots__ = ("records", "checks")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AppendRecord]
    checks: _containers.RepeatedCompositeFieldContainer[ConsistencyCheck]
    def __init__(self, records: _Optional[_Iterable[_Union[AppendRecord, _Mapping]]] = ..., checks: _Optional[_Iterable[_Union[ConsistencyCheck, _Mapping]]] = ...) -> None: ...

class ConsistencyCheck(_message.Message):
    __slots__ = ("stream_state",)
    class StreamStateCheck(_message.Message):
        __slots__ = ("stream", "expected_state")
        STREAM_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_STATE_FIELD_NUMBER: _ClassVar[int]
        stream: str
        expected_state: int
        def __init__(self, stream: _Optional[str] = ..., expected_state: _Optional[int] = ...) -> None: ...
    STREAM_STATE_FIELD_NUMBER: _ClassVar[int]
    stream_state: ConsistencyCheck.StreamStateCheck
    def __init__(self, stream_state: _Optional[_Union[ConsistencyCheck.StreamStateCheck, _Mapping]] = ...) -> None: ...

class AppendRecordsResponse(_message.Message):
    __slots__ = ("revisions", "position")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[StreamRevision]
    position: int
    def __init__(self, revisions: _Optional[_Iterable[_Union[StreamRevision, _Mapping]]] = ..., position: _Optional[int] = ...) -> None: ...

class StreamRevision(_message.Message):
    __slots__ = ("stream", "revision")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    stream: str
    revision: int
    def __init__(self, stream: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("stream", "records", "expected_revision")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    stream: str
    records: _containers.RepeatedCompositeFieldContainer[AppendRecord]
    expected_revision: int
    def __init__(self, stream: _Optional[str] = ..., records: _Optional[_Iterable[_Union[AppendRecord, _Mapping]]] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("stream", "stream_revision", "position")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    STREAM_REVISION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    stream: str
    stream_revision: int
    position: int
    def __init__(self, stream: _Optional[str] = ..., stream_revision: _Optional[int] = ..., position: _Optional[int] = ...) -> None: ...

class AppendSessionResponse(_message.Message):
    __slots__ = ("output", "position")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    output: _containers.RepeatedCompositeFieldContainer[AppendResponse]
    position: int
    def __init__(self, output: _Optional[_Iterable[_Union[AppendResponse, _Mapping]]] = ..., position: _Optional[int] = ...) -> None: ...

class SchemaInfo(_message.Message):
    __slots__ = ("format", "name", "id")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    format: SchemaFormat
    name: str
    id: str
    def __init__(self, format: _Optional[_Union[SchemaFormat, str]] = ..., name: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class AppendRecord(_message.Message):
    __slots__ = ("record_id", "properties", "schema", "data", "stream")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    record_id: str
    properties: _containers.MessageMap[str, _struct_pb2.Value]
    schema: SchemaInfo
    data: bytes
    stream: str
    def __init__(self, record_id: _Optional[str] = ..., properties: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., schema: _Optional[_Union[SchemaInfo, _Mapping]] = ..., data: _Optional[bytes] = ..., stream: _Optional[str] = ...) -> None: ...
