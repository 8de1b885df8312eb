from decider.stores.esdb._proto import shared_pb2 as _shared_pb2
from decider.stores.esdb._proto import status_pb2 as _status_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("stream", "all", "read_direction", "resolve_links", "count", "subscription", "filter", "no_filter", "uuid_option", "control_option")
        class ReadDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            Forwards: _ClassVar[ReadReq.Options.ReadDirection]
            Backwards: _ClassVar[ReadReq.Options.ReadDirection]
        Forwards: ReadReq.Options.ReadDirection
        Backwards: ReadReq.Options.ReadDirection
        class StreamOptions(_message.Message):
            __slots__ = ("stream_identifier", "revision", "start", "end")
            STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
            REVISION_FIELD_NUMBER: _ClassVar[int]
            START_FIELD_NUMBER: _ClassVar[int]
            END_FIELD_NUMBER: _ClassVar[int]
            stream_identifier: _shared_pb2.StreamIdentifier
            revision: int
            start: _shared_pb2.Empty
            end: _shared_pb2.Empty
            def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., revision: _Optional[int] = ..., start: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., end: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
        class AllOptions(_message.Message):
            __slots__ = ("position", "start", "end")
            POSITION_FIELD_NUMBER: _ClassVar[int]
            START_FIELD_NUMBER: _ClassVar[int]
            END_FIELD_NUMBER: _ClassVar[int]
            position: ReadReq.Options.Position
            start: _shared_pb2.Empty
            end: _shared_pb2.Empty
            def __init__(self, position: _Optional[_Union[ReadReq.Options.Position, _Mapping]] = ..., start: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., end: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
        class SubscriptionOptions(_message.Message):
            __slots__ = ()
            def __init__(self) -> None: ...
        class Position(_message.Message):
            __slots__ = ("commit_position", "prepare_position")
            COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
            PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
            commit_position: int
            prepare_position: int
            def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
        class FilterOptions(_message.Message):
            __slots__ = ("stream_identifier", "event_type", "max", "count", "checkpointIntervalMultiplier")
            class Expression(_message.Message):
                __slots__ = ("regex", "prefix")
                REGEX_FIELD_NUMBER: _ClassVar[int]
                PREFIX_FIELD_NUMBER: _ClassVar[int]
                regex: str
                prefix: _containers.RepeatedScalarFieldContainer[str]
                def __init__(self, regex: _Optional[str] = ..., prefix: _Optional[_Iterable[str]] = ...) -> None: ...
            STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
            EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
            MAX_FIELD_NUMBER: _ClassVar[int]
            COUNT_FIELD_NUMBER: _ClassVar[int]
            CHECKPOINTINTERVALMULTIPLIER_FIELD_NUMBER: _ClassVar[int]
            stream_identifier: ReadReq.Options.FilterOptions.Expression
            event_type: ReadReq.Options.FilterOptions.Expression
            max: int
            count: _shared_pb2.Empty
            checkpointIntervalMultiplier: int
            def __init__(self, stream_identifier: _Optional[_Union[ReadReq.Options.FilterOptions.Expression, _Mapping]] = ..., event_type: _Optional[_Union[ReadReq.Options.FilterOptions.Expression, _Mapping]] = ..., max: _Optional[int] = ..., count: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., checkpointIntervalMultiplier: _Optional[int] = ...) -> None: ...
        class UUIDOption(_message.Message):
            __slots__ = ("structured", "string")
            STRUCTURED_FIELD_NUMBER: _ClassVar[int]
            STRING_FIELD_NUMBER: _ClassVar[int]
            structured: _shared_pb2.Empty
            string: _shared_pb2.Empty
            def __init__(self, structured: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., string: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
        class ControlOption(_message.Message):
            __slots__ = ("compatibility",)
            COMPATIBILITY_FIELD_NUMBER: _ClassVar[int]
            compatibility: int
            def __init__(self, compatibility: _Optional[int] = ...) -> None: ...
        STREAM_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        READ_DIRECTION_FIELD_NUMBER: _ClassVar[int]
        RESOLVE_LINKS_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
        FILTER_FIELD_NUMBER: _ClassVar[int]
        NO_FILTER_FIELD_NUMBER: _ClassVar[int]
        UUID_OPTION_FIELD_NUMBER: _ClassVar[int]
        CONTROL_OPTION_FIELD_NUMBER: _ClassVar[int]
        stream: ReadReq.Options.StreamOptions
        all: ReadReq.Options.AllOptions
        read_direction: ReadReq.Options.ReadDirection
        resolve_links: bool
        count: int
        subscription: ReadReq.Options.SubscriptionOptions
        filter: ReadReq.Options.FilterOptions
        no_filter: _shared_pb2.Empty
        uuid_option: ReadReq.Options.UUIDOption
        control_option: ReadReq.Options.ControlOption
        def __init__(self, stream: _Optional[_Union[ReadReq.Options.StreamOptions, _Mapping]] = ..., all: _Optional[_Union[ReadReq.Options.AllOptions, _Mapping]] = ..., read_direction: _Optional[_Union[ReadReq.Options.ReadDirection, str]] = ..., resolve_links: bool = ..., count: _Optional[int] = ..., subscription: _Optional[_Union[ReadReq.Options.SubscriptionOptions, _Mapping]] = ..., filter: _Optional[_Union[ReadReq.Options.FilterOptions, _Mapping]] = ..., no_filter: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., uuid_option: _Optional[_Union[ReadReq.Options.UUIDOption, _Mapping]] = ..., control_option: _Optional[_Union[ReadReq.Options.ControlOption, _Mapping]] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: ReadReq.Options
    def __init__(self, options: _Optional[_Union[ReadReq.Options, _Mapping]] = ...) -> None: ...

class ReadResp(_message.Message):
    __slots__ = ("event", "confirmation", "checkpoint", "stream_not_found", "first_stream_position", "last_stream_position", "last_all_stream_position", "caught_up", "fell_behind")
    class ReadEvent(_message.Message):
        __slots__ = ("event", "link", "commit_position", "no_position")
        class RecordedEvent(_message.Message):
            __slots__ = ("id", "stream_identifier", "stream_revision", "prepare_position", "commit_position", "metadata", "custom_metadata", "data")
            class MetadataEntry(_message.Message):
                __slots__ = ("key", "value")
                KEY_FIELD_NUMBER: _ClassVar[int]
                VALUE_FIELD_NUMBER: _ClassVar[int]
                key: str
                value: str
                def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
            ID_FIELD_NUMBER: _ClassVar[int]
            STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
            STREAM_REVISION_FIELD_NUMBER: _ClassVar[int]
            PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
            COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
            METADATA_FIELD_NUMBER: _ClassVar[int]
            CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
            DATA_FIELD_NUMBER: _ClassVar[int]
            id: _shared_pb2.UUID
            stream_identifier: _shared_pb2.StreamIdentifier
            stream_revision: int
            prepare_position: int
            commit_position: int
            metadata: _containers.ScalarMap[str, str]
            custom_metadata: bytes
            data: bytes
            def __init__(self, id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., stream_revision: _Optional[int] = ..., prepare_position: _Optional[int] = ..., commit_position: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., custom_metadata: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...
        EVENT_FIELD_NUMBER: _ClassVar[int]
        LINK_FIELD_NUMBER: _ClassVar[int]
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        NO_POSITION_FIELD_NUMBER: _ClassVar[int]
        event: ReadResp.ReadEvent.RecordedEvent
        link: ReadResp.ReadEvent.RecordedEvent
        commit_position: int
        no_position: _shared_pb2.Empty
        def __init__(self, event: _Optional[_Union[ReadResp.ReadEvent.RecordedEvent, _Mapping]] = ..., link: _Optional[_Union[ReadResp.ReadEvent.RecordedEvent, _Mapping]] = ..., commit_position: _Optional[int] = ..., no_position: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class SubscriptionConfirmation(_message.Message):
        __slots__ = ("subscription_id",)
        SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
        subscription_id: str
        def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...
    class Checkpoint(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    class CaughtUp(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class FellBehind(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    class StreamNotFound(_message.Message):
        __slots__ = ("stream_identifier",)
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ...) -> None: ...
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    STREAM_NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    FIRST_STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
    LAST_STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
    LAST_ALL_STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    FELL_BEHIND_FIELD_NUMBER: _ClassVar[int]
    event: ReadResp.ReadEvent
    confirmation: ReadResp.SubscriptionConfirmation
    checkpoint: ReadResp.Checkpoint
    stream_not_found: ReadResp.StreamNotFound
    first_stream_position: int
    last_stream_position: int
    last_all_stream_position: _shared_pb2.AllStreamPosition
    caught_up: ReadResp.CaughtUp
    fell_behind: ReadResp.FellBehind
    def __init__(self, event: _Optional[_Union[ReadResp.ReadEvent, _Mapping]] = ..., confirmation: _Optional[_Union[ReadResp.SubscriptionConfirmation, _Mapping]] = ..., checkpoint: _Optional[_Union[ReadResp.Checkpoint, _Mapping]] = ..., stream_not_found: _Optional[_Union[ReadResp.StreamNotFound, _Mapping]] = ..., first_stream_position: _Optional[int] = ..., last_stream_position: _Optional[int] = ..., last_all_stream_position: _Optional[_Union[_shared_pb2.AllStreamPosition, _Mapping]] = ..., caught_up: _Optional[_Union[ReadResp.CaughtUp, _Mapping]] = ..., fell_behind: _Optional[_Union[ReadResp.FellBehind, _Mapping]] = ...) -> None: ...

class AppendReq(_message.Message):
    __slots__ = ("options", "proposed_message")
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "revision", "no_stream", "any", "stream_exists")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        REVISION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        ANY_FIELD_NUMBER: _ClassVar[int]
        STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        revision: int
        no_stream: _shared_pb2.Empty
        any: _shared_pb2.Empty
        stream_exists: _shared_pb2.Empty
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., revision: _Optional[int] = ..., no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., any: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., stream_exists: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class ProposedMessage(_message.Message):
        __slots__ = ("id", "metadata", "custom_metadata", "data")
        class MetadataEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        ID_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        id: _shared_pb2.UUID
        metadata: _containers.ScalarMap[str, str]
        custom_metadata: bytes
        data: bytes
        def __init__(self, id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., custom_metadata: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    options: AppendReq.Options
    proposed_message: AppendReq.ProposedMessage
    def __init__(self, options: _Optional[_Union[AppendReq.Options, _Mapping]] = ..., proposed_message: _Optional[_Union[AppendReq.ProposedMessage, _Mapping]] = ...) -> None: ...

class AppendResp(_message.Message):
    __slots__ = ("success", "wrong_expected_version")
    class Position(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    class Success(_message.Message):
        __slots__ = ("current_revision", "no_stream", "position", "no_position")
        CURRENT_REVISION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        POSITION_FIELD_NUMBER: _ClassVar[int]
        NO_POSITION_FIELD_NUMBER: _ClassVar[int]
        current_revision: int
        no_stream: _shared_pb2.Empty
        position: AppendResp.Position
        no_position: _shared_pb2.Empty
        def __init__(self, current_revision: _Optional[int] = ..., no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., position: _Optional[_Union[AppendResp.Position, _Mapping]] = ..., no_position: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class WrongExpectedVersion(_message.Message):
        __slots__ = ("current_revision_20_6_0", "no_stream_20_6_0", "expected_revision_20_6_0", "any_20_6_0", "stream_exists_20_6_0", "current_revision", "current_no_stream", "expected_revision", "expected_any", "expected_stream_exists", "expected_no_stream")
        CURRENT_REVISION_20_6_0_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_20_6_0_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_REVISION_20_6_0_FIELD_NUMBER: _ClassVar[int]
        ANY_20_6_0_FIELD_NUMBER: _ClassVar[int]
        STREAM_EXISTS_20_6_0_FIELD_NUMBER: _ClassVar[int]
        CURRENT_REVISION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_ANY_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
        EXPECTED_NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        current_revision_20_6_0: int
        no_stream_20_6_0: _shared_pb2.Empty
        expected_revision_20_6_0: int
        any_20_6_0: _shared_pb2.Empty
        stream_exists_20_6_0: _shared_pb2.Empty
        current_revision: int
        current_no_stream: _shared_pb2.Empty
        expected_revision: int
        expected_any: _shared_pb2.Empty
        expected_stream_exists: _shared_pb2.Empty
        expected_no_stream: _shared_pb2.Empty
        def __init__(self, current_revision_20_6_0: _Optional[int] = ..., no_stream_20_6_0: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., expected_revision_20_6_0: _Optional[int] = ..., any_20_6_0: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., stream_exists_20_6_0: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., current_revision: _Optional[int] = ..., current_no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., expected_revision: _Optional[int] = ..., expected_any: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., expected_stream_exists: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., expected_no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    WRONG_EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    success: AppendResp.Success
    wrong_expected_version: AppendResp.WrongExpectedVersion
    def __init__(self, success: _Optional[_Union[AppendResp.Success, _Mapping]] = ..., wrong_expected_version: _Optional[_Union[AppendResp.WrongExpectedVersion, _Mapping]] = ...) -> None: ...

class BatchAppendReq(_message.Message):
    __slots__ = ("correlation_id", "options", "proposed_messages", "is_final")
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "stream_position", "no_stream", "any", "stream_exists", "deadline_21_10_0", "deadline")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        ANY_FIELD_NUMBER: _ClassVar[int]
        STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
        DEADLINE_21_10_0_FIELD_NUMBER: _ClassVar[int]
        DEADLINE_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        stream_position: int
        no_stream: _empty_pb2.Empty
        any: _empty_pb2.Empty
        stream_exists: _empty_pb2.Empty
        deadline_21_10_0: _timestamp_pb2.Timestamp
        deadline: _duration_pb2.Duration
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., stream_position: _Optional[int] = ..., no_stream: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., any: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., stream_exists: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., deadline_21_10_0: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    class ProposedMessage(_message.Message):
        __slots__ = ("id", "metadata", "custom_metadata", "data")
        class MetadataEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        ID_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
        DATA_FIELD_NUMBER: _ClassVar[int]
        id: _shared_pb2.UUID
        metadata: _containers.ScalarMap[str, str]
        custom_metadata: bytes
        data: bytes
        def __init__(self, id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., custom_metadata: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    IS_FINAL_FIELD_NUMBER: _ClassVar[int]
    correlation_id: _shared_pb2.UUID
    options: BatchAppendReq.Options
    proposed_messages: _containers.RepeatedCompositeFieldContainer[BatchAppendReq.ProposedMessage]
    is_final: bool
    def __init__(self, correlation_id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., options: _Optional[_Union[BatchAppendReq.Options, _Mapping]] = ..., proposed_messages: _Optional[_Iterable[_Union[BatchAppendReq.ProposedMessage, _Mapping]]] = ..., is_final: bool = ...) -> None: ...

class BatchAppendResp(_message.Message):
    __slots__ = ("correlation_id", "error", "success", "stream_identifier", "stream_position", "no_stream", "any", "stream_exists")
    class Success(_message.Message):
        __slots__ = ("current_revision", "no_stream", "position", "no_position")
        CURRENT_REVISION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        POSITION_FIELD_NUMBER: _ClassVar[int]
        NO_POSITION_FIELD_NUMBER: _ClassVar[int]
        current_revision: int
        no_stream: _empty_pb2.Empty
        position: _shared_pb2.AllStreamPosition
        no_position: _empty_pb2.Empty
        def __init__(self, current_revision: _Optional[int] = ..., no_stream: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., position: _Optional[_Union[_shared_pb2.AllStreamPosition, _Mapping]] = ..., no_position: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ...) -> None: ...
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    STREAM_POSITION_FIELD_NUMBER: _ClassVar[int]
    NO_STREAM_FIELD_NUMBER: _ClassVar[int]
    ANY_FIELD_NUMBER: _ClassVar[int]
    STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
    correlation_id: _shared_pb2.UUID
    error: _status_pb2.Status
    success: BatchAppendResp.Success
    stream_identifier: _shared_pb2.StreamIdentifier
    stream_position: int
    no_stream: _empty_pb2.Empty
    any: _empty_pb2.Empty
    stream_exists: _empty_pb2.Empty
    def __init__(self, correlation_id: _Optional[_Union[_shared_pb2.UUID, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., success: _Optional[_Union[BatchAppendResp.Success, _Mapping]] = ..., stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., stream_position: _Optional[int] = ..., no_stream: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., any: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ..., stream_exists: _Optional[_Union[_empty_pb2.Empty, _Mapping]] = ...) -> None: ...

class DeleteReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "revision", "no_stream", "any", "stream_exists")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        REVISION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        ANY_FIELD_NUMBER: _ClassVar[int]
        STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        revision: int
        no_stream: _shared_pb2.Empty
        any: _shared_pb2.Empty
        stream_exists: _shared_pb2.Empty
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., revision: _Optional[int] = ..., no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., any: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., stream_exists: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: DeleteReq.Options
    def __init__(self, options: _Optional[_Union[DeleteReq.Options, _Mapping]] = ...) -> None: ...

class DeleteResp(_message.Message):
    __slots__ = ("position", "no_position")
    class Position(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    POSITION_FIELD_NUMBER: _ClassVar[int]
    NO_POSITION_FIELD_NUMBER: _ClassVar[int]
    position: DeleteResp.Position
    no_position: _shared_pb2.Empty
    def __init__(self, position: _Optional[_Union[DeleteResp.Position, _Mapping]] = ..., no_position: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...

class TombstoneReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "revision", "no_stream", "any", "stream_exists")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        REVISION_FIELD_NUMBER: _ClassVar[int]
        NO_STREAM_FIELD_NUMBER: _ClassVar[int]
        ANY_FIELD_NUMBER: _ClassVar[int]
        STREAM_EXISTS_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        revision: int
        no_stream: _shared_pb2.Empty
        any: _shared_pb2.Empty
        stream_exists: _shared_pb2.Empty
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., revision: _Optional[int] = ..., no_stream: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., any: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., stream_exists: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: TombstoneReq.Options
    def __init__(self, options: _Optional[_Union[TombstoneReq.Options, _Mapping]] = ...) -> None: ...

class TombstoneResp(_message.Message):
    __slots__ = ("position", "no_position")
    class Position(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    POSITION_FIELD_NUMBER: _ClassVar[int]
    NO_POSITION_FIELD_NUMBER: _ClassVar[int]
    position: TombstoneResp.Position
    no_position: _shared_pb2.Empty
    def __init__(self, position: _Optional[_Union[TombstoneResp.Position, _Mapping]] = ..., no_position: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
