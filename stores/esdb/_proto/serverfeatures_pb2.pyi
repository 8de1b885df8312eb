from decider.stores.esdb._proto import shared_pb2 as _shared_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SupportedMethods(_message.Message):
    __slots__ = ("methods", "event_store_server_version")
    METHODS_FIELD_NUMBER: _ClassVar[int]
    EVENT_STORE_SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedCompositeFieldContainer[SupportedMethod]
    event_store_server_version: str
    def __init__(self, methods: _Optional[_Iterable[_Union[SupportedMethod, _Mapping]]] = ..., event_store_server_version: _Optional[str] = ...) -> None: ...

class SupportedMethod(_message.Message):
    __slots__ = ("method_name", "service_name", "features")
    METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    method_name: str
    service_name: str
    features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, method_name: _Optional[str] = ..., service_name: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ...) -> None: ...
