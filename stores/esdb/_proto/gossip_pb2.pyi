from decider.stores.esdb._proto import shared_pb2 as _shared_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterInfo(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    def __init__(self, members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ...) -> None: ...

class EndPoint(_message.Message):
    __slots__ = ("address", "port")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    address: str
    port: int
    def __init__(self, address: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class MemberInfo(_message.Message):
    __slots__ = ("instance_id", "time_stamp", "state", "is_alive", "http_end_point")
    class VNodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        Initializing: _ClassVar[MemberInfo.VNodeState]
        DiscoverLeader: _ClassVar[MemberInfo.VNodeState]
        Unknown: _ClassVar[MemberInfo.VNodeState]
        PreReplica: _ClassVar[MemberInfo.VNodeState]
        CatchingUp: _ClassVar[MemberInfo.VNodeState]
        Clone: _ClassVar[MemberInfo.VNodeState]
        Follower: _ClassVar[MemberInfo.VNodeState]
        PreLeader: _ClassVar[MemberInfo.VNodeState]
        Leader: _ClassVar[MemberInfo.VNodeState]
        Manager: _ClassVar[MemberInfo.VNodeState]
        ShuttingDown: _ClassVar[MemberInfo.VNodeState]
        Shutdown: _ClassVar[MemberInfo.VNodeState]
        ReadOnlyLeaderless: _ClassVar[MemberInfo.VNodeState]
        PreReadOnlyReplica: _ClassVar[MemberInfo.VNodeState]
        ReadOnlyReplica: _ClassVar[MemberInfo.VNodeState]
        ResigningLeader: _ClassVar[MemberInfo.VNodeState]
    Initializing: MemberInfo.VNodeState
    DiscoverLeader: MemberInfo.VNodeState
    Unknown: MemberInfo.VNodeState
    PreReplica: MemberInfo.VNodeState
    CatchingUp: MemberInfo.VNodeState
    Clone: MemberInfo.VNodeState
    Follower: MemberInfo.VNodeState
    PreLeader: MemberInfo.VNodeState
    Leader: MemberInfo.VNodeState
    Manager: MemberInfo.VNodeState
    ShuttingDown: MemberInfo.VNodeState
    Shutdown: MemberInfo.VNodeState
    ReadOnlyLeaderless: MemberInfo.VNodeState
    PreReadOnlyReplica: MemberInfo.VNodeState
    ReadOnlyReplica: MemberInfo.VNodeState
    ResigningLeader: MemberInfo.VNodeState
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_STAMP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    IS_ALIVE_FIELD_NUMBER: _ClassVar[int]
    HTTP_END_POINT_FIELD_NUMBER: _ClassVar[int]
    instance_id: _shared_pb2.UUID
    time_stamp: int
    state: MemberInfo.VNodeState
    is_alive: bool
    http_end_point: EndPoint
    def __init__(self, instance_id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., time_stamp: _Optional[int] = ..., state: _Optional[_Union[MemberInfo.VNodeState, str]] = ..., is_alive: bool = ..., http_end_point: _Optional[_Union[EndPoint, _Mapping]] = ...) -> None: ...
