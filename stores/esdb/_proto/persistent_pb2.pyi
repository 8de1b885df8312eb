from decider.stores.esdb._proto import shared_pb2 as _shared_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadReq(_message.Message):
    __slots__ = ("options", "ack", "nack")
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "all", "group_name", "buffer_size", "uuid_option")
        class UUIDOption(_message.Message):
            __slots__ = ("structured", "string")
            STRUCTURED_FIELD_NUMBER: _ClassVar[int]
            STRING_FIELD_NUMBER: _ClassVar[int]
            structured: _shared_pb2.Empty
            string: _shared_pb2.Empty
            def __init__(self, structured: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., string: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
        UUID_OPTION_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        all: _shared_pb2.Empty
        group_name: str
        buffer_size: int
        uuid_option: ReadReq.Options.UUIDOption
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., all: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., group_name: _Optional[str] = ..., buffer_size: _Optional[int] = ..., uuid_option: _Optional[_Union[ReadReq.Options.UUIDOption, _Mapping]] = ...) -> None: ...
    class Ack(_message.Message):
        __slots__ = ("id", "ids")
        ID_FIELD_NUMBER: _ClassVar[int]
        IDS_FIELD_NUMBER: _ClassVar[int]
        id: bytes
        ids: _containers.RepeatedCompositeFieldContainer[_shared_pb2.UUID]
        def __init__(self, id: _Optional[bytes] = ..., ids: _Optional[_Iterable[_Union[_shared_pb2.UUID, _Mapping]]] = ...) -> None: ...
    class Nack(_message.Message):
        __slots__ = ("id", "ids", "action", "reason")
        class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            Unknown: _ClassVar[ReadReq.Nack.Action]
            Park: _ClassVar[ReadReq.Nack.Action]
            Retry: _ClassVar[ReadReq.Nack.Action]
            Skip: _ClassVar[ReadReq.Nack.Action]
            Stop: _ClassVar[ReadReq.Nack.Action]
        Unknown: ReadReq.Nack.Action
        Park: ReadReq.Nack.Action
        Retry: ReadReq.Nack.Action
        Skip: ReadReq.Nack.Action
        Stop: ReadReq.Nack.Action
        ID_FIELD_NUMBER: _ClassVar[int]
        IDS_FIELD_NUMBER: _ClassVar[int]
        ACTION_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        id: bytes
        ids: _containers.RepeatedCompositeFieldContainer[_shared_pb2.UUID]
        action: ReadReq.Nack.Action
        reason: str
        def __init__(self, id: _Optional[bytes] = ..., ids: _Optional[_Iterable[_Union[_shared_pb2.UUID, _Mapping]]] = ..., action: _Optional[_Union[ReadReq.Nack.Action, str]] = ..., reason: _Optional[str] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    options: ReadReq.Options
    ack: ReadReq.Ack
    nack: ReadReq.Nack
    def __init__(self, options: _Optional[_Union[ReadReq.Options, _Mapping]] = ..., ack: _Optional[_Union[ReadReq.Ack, _Mapping]] = ..., nack: _Optional[_Union[ReadReq.Nack, _Mapping]] = ...) -> None: ...

class ReadResp(_message.Message):
    __slots__ = ("event", "subscription_confirmation")
    class ReadEvent(_message.Message):
        __slots__ = ("event", "link", "commit_position", "no_position", "retry_count", "no_retry_count")
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
        RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
        NO_RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
        event: ReadResp.ReadEvent.RecordedEvent
        link: ReadResp.ReadEvent.RecordedEvent
        commit_position: int
        no_position: _shared_pb2.Empty
        retry_count: int
        no_retry_count: _shared_pb2.Empty
        def __init__(self, event: _Optional[_Union[ReadResp.ReadEvent.RecordedEvent, _Mapping]] = ..., link: _Optional[_Union[ReadResp.ReadEvent.RecordedEvent, _Mapping]] = ..., commit_position: _Optional[int] = ..., no_position: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., retry_count: _Optional[int] = ..., no_retry_count: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class SubscriptionConfirmation(_message.Message):
        __slots__ = ("subscription_id",)
        SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
        subscription_id: str
        def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_CONFIRMATION_FIELD_NUMBER: _ClassVar[int]
    event: ReadResp.ReadEvent
    subscription_confirmation: ReadResp.SubscriptionConfirmation
    def __init__(self, event: _Optional[_Union[ReadResp.ReadEvent, _Mapping]] = ..., subscription_confirmation: _Optional[_Union[ReadResp.SubscriptionConfirmation, _Mapping]] = ...) -> None: ...

class CreateReq(_message.Message):
    __slots__ = ("options",)
    class ConsumerStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DispatchToSingle: _ClassVar[CreateReq.ConsumerStrategy]
        RoundRobin: _ClassVar[CreateReq.ConsumerStrategy]
        Pinned: _ClassVar[CreateReq.ConsumerStrategy]
    DispatchToSingle: CreateReq.ConsumerStrategy
    RoundRobin: CreateReq.ConsumerStrategy
    Pinned: CreateReq.ConsumerStrategy
    class Options(_message.Message):
        __slots__ = ("stream", "all", "stream_identifier", "group_name", "settings")
        STREAM_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        SETTINGS_FIELD_NUMBER: _ClassVar[int]
        stream: CreateReq.StreamOptions
        all: CreateReq.AllOptions
        stream_identifier: _shared_pb2.StreamIdentifier
        group_name: str
        settings: CreateReq.Settings
        def __init__(self, stream: _Optional[_Union[CreateReq.StreamOptions, _Mapping]] = ..., all: _Optional[_Union[CreateReq.AllOptions, _Mapping]] = ..., stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., group_name: _Optional[str] = ..., settings: _Optional[_Union[CreateReq.Settings, _Mapping]] = ...) -> None: ...
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
        __slots__ = ("position", "start", "end", "filter", "no_filter")
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
            stream_identifier: CreateReq.AllOptions.FilterOptions.Expression
            event_type: CreateReq.AllOptions.FilterOptions.Expression
            max: int
            count: _shared_pb2.Empty
            checkpointIntervalMultiplier: int
            def __init__(self, stream_identifier: _Optional[_Union[CreateReq.AllOptions.FilterOptions.Expression, _Mapping]] = ..., event_type: _Optional[_Union[CreateReq.AllOptions.FilterOptions.Expression, _Mapping]] = ..., max: _Optional[int] = ..., count: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., checkpointIntervalMultiplier: _Optional[int] = ...) -> None: ...
        POSITION_FIELD_NUMBER: _ClassVar[int]
        START_FIELD_NUMBER: _ClassVar[int]
        END_FIELD_NUMBER: _ClassVar[int]
        FILTER_FIELD_NUMBER: _ClassVar[int]
        NO_FILTER_FIELD_NUMBER: _ClassVar[int]
        position: CreateReq.Position
        start: _shared_pb2.Empty
        end: _shared_pb2.Empty
        filter: CreateReq.AllOptions.FilterOptions
        no_filter: _shared_pb2.Empty
        def __init__(self, position: _Optional[_Union[CreateReq.Position, _Mapping]] = ..., start: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., end: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., filter: _Optional[_Union[CreateReq.AllOptions.FilterOptions, _Mapping]] = ..., no_filter: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class Position(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    class Settings(_message.Message):
        __slots__ = ("resolve_links", "revision", "extra_statistics", "max_retry_count", "min_checkpoint_count", "max_checkpoint_count", "max_subscriber_count", "live_buffer_size", "read_batch_size", "history_buffer_size", "named_consumer_strategy", "message_timeout_ticks", "message_timeout_ms", "checkpoint_after_ticks", "checkpoint_after_ms", "consumer_strategy")
        RESOLVE_LINKS_FIELD_NUMBER: _ClassVar[int]
        REVISION_FIELD_NUMBER: _ClassVar[int]
        EXTRA_STATISTICS_FIELD_NUMBER: _ClassVar[int]
        MAX_RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
        MIN_CHECKPOINT_COUNT_FIELD_NUMBER: _ClassVar[int]
        MAX_CHECKPOINT_COUNT_FIELD_NUMBER: _ClassVar[int]
        MAX_SUBSCRIBER_COUNT_FIELD_NUMBER: _ClassVar[int]
        LIVE_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
        READ_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
        HISTORY_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
        NAMED_CONSUMER_STRATEGY_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_TIMEOUT_TICKS_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        CHECKPOINT_AFTER_TICKS_FIELD_NUMBER: _ClassVar[int]
        CHECKPOINT_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
        CONSUMER_STRATEGY_FIELD_NUMBER: _ClassVar[int]
        resolve_links: bool
        revision: int
        extra_statistics: bool
        max_retry_count: int
        min_checkpoint_count: int
        max_checkpoint_count: int
        max_subscriber_count: int
        live_buffer_size: int
        read_batch_size: int
        history_buffer_size: int
        named_consumer_strategy: CreateReq.ConsumerStrategy
        message_timeout_ticks: int
        message_timeout_ms: int
        checkpoint_after_ticks: int
        checkpoint_after_ms: int
        consumer_strategy: str
        def __init__(self, resolve_links: bool = ..., revision: _Optional[int] = ..., extra_statistics: bool = ..., max_retry_count: _Optional[int] = ..., min_checkpoint_count: _Optional[int] = ..., max_checkpoint_count: _Optional[int] = ..., max_subscriber_count: _Optional[int] = ..., live_buffer_size: _Optional[int] = ..., read_batch_size: _Optional[int] = ..., history_buffer_size: _Optional[int] = ..., named_consumer_strategy: _Optional[_Union[CreateReq.ConsumerStrategy, str]] = ..., message_timeout_ticks: _Optional[int] = ..., message_timeout_ms: _Optional[int] = ..., checkpoint_after_ticks: _Optional[int] = ..., checkpoint_after_ms: _Optional[int] = ..., consumer_strategy: _Optional[str] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: CreateReq.Options
    def __init__(self, options: _Optional[_Union[CreateReq.Options, _Mapping]] = ...) -> None: ...

class CreateResp(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UpdateReq(_message.Message):
    __slots__ = ("options",)
    class ConsumerStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DispatchToSingle: _ClassVar[UpdateReq.ConsumerStrategy]
        RoundRobin: _ClassVar[UpdateReq.ConsumerStrategy]
        Pinned: _ClassVar[UpdateReq.ConsumerStrategy]
    DispatchToSingle: UpdateReq.ConsumerStrategy
    RoundRobin: UpdateReq.ConsumerStrategy
    Pinned: UpdateReq.ConsumerStrategy
    class Options(_message.Message):
        __slots__ = ("stream", "all", "stream_identifier", "group_name", "settings")
        STREAM_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        SETTINGS_FIELD_NUMBER: _ClassVar[int]
        stream: UpdateReq.StreamOptions
        all: UpdateReq.AllOptions
        stream_identifier: _shared_pb2.StreamIdentifier
        group_name: str
        settings: UpdateReq.Settings
        def __init__(self, stream: _Optional[_Union[UpdateReq.StreamOptions, _Mapping]] = ..., all: _Optional[_Union[UpdateReq.AllOptions, _Mapping]] = ..., stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., group_name: _Optional[str] = ..., settings: _Optional[_Union[UpdateReq.Settings, _Mapping]] = ...) -> None: ...
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
        position: UpdateReq.Position
        start: _shared_pb2.Empty
        end: _shared_pb2.Empty
        def __init__(self, position: _Optional[_Union[UpdateReq.Position, _Mapping]] = ..., start: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., end: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    class Position(_message.Message):
        __slots__ = ("commit_position", "prepare_position")
        COMMIT_POSITION_FIELD_NUMBER: _ClassVar[int]
        PREPARE_POSITION_FIELD_NUMBER: _ClassVar[int]
        commit_position: int
        prepare_position: int
        def __init__(self, commit_position: _Optional[int] = ..., prepare_position: _Optional[int] = ...) -> None: ...
    class Settings(_message.Message):
        __slots__ = ("resolve_links", "revision", "extra_statistics", "max_retry_count", "min_checkpoint_count", "max_checkpoint_count", "max_subscriber_count", "live_buffer_size", "read_batch_size", "history_buffer_size", "named_consumer_strategy", "message_timeout_ticks", "message_timeout_ms", "checkpoint_after_ticks", "checkpoint_after_ms")
        RESOLVE_LINKS_FIELD_NUMBER: _ClassVar[int]
        REVISION_FIELD_NUMBER: _ClassVar[int]
        EXTRA_STATISTICS_FIELD_NUMBER: _ClassVar[int]
        MAX_RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
        MIN_CHECKPOINT_COUNT_FIELD_NUMBER: _ClassVar[int]
        MAX_CHECKPOINT_COUNT_FIELD_NUMBER: _ClassVar[int]
        MAX_SUBSCRIBER_COUNT_FIELD_NUMBER: _ClassVar[int]
        LIVE_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
        READ_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
        HISTORY_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
        NAMED_CONSUMER_STRATEGY_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_TIMEOUT_TICKS_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        CHECKPOINT_AFTER_TICKS_FIELD_NUMBER: _ClassVar[int]
        CHECKPOINT_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
        resolve_links: bool
        revision: int
        extra_statistics: bool
        max_retry_count: int
        min_checkpoint_count: int
        max_checkpoint_count: int
        max_subscriber_count: int
        live_buffer_size: int
        read_batch_size: int
        history_buffer_size: int
        named_consumer_strategy: UpdateReq.ConsumerStrategy
        message_timeout_ticks: int
        message_timeout_ms: int
        checkpoint_after_ticks: int
        checkpoint_after_ms: int
        def __init__(self, resolve_links: bool = ..., revision: _Optional[int] = ..., extra_statistics: bool = ..., max_retry_count: _Optional[int] = ..., min_checkpoint_count: _Optional[int] = ..., max_checkpoint_count: _Optional[int] = ..., max_subscriber_count: _Optional[int] = ..., live_buffer_size: _Optional[int] = ..., read_batch_size: _Optional[int] = ..., history_buffer_size: _Optional[int] = ..., named_consumer_strategy: _Optional[_Union[UpdateReq.ConsumerStrategy, str]] = ..., message_timeout_ticks: _Optional[int] = ..., message_timeout_ms: _Optional[int] = ..., checkpoint_after_ticks: _Optional[int] = ..., checkpoint_after_ms: _Optional[int] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: UpdateReq.Options
    def __init__(self, options: _Optional[_Union[UpdateReq.Options, _Mapping]] = ...) -> None: ...

class UpdateResp(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "all", "group_name")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        all: _shared_pb2.Empty
        group_name: str
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., all: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., group_name: _Optional[str] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: DeleteReq.Options
    def __init__(self, options: _Optional[_Union[DeleteReq.Options, _Mapping]] = ...) -> None: ...

class DeleteResp(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetInfoReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("stream_identifier", "all", "group_name")
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        stream_identifier: _shared_pb2.StreamIdentifier
        all: _shared_pb2.Empty
        group_name: str
        def __init__(self, stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., all: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., group_name: _Optional[str] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: GetInfoReq.Options
    def __init__(self, options: _Optional[_Union[GetInfoReq.Options, _Mapping]] = ...) -> None: ...

class GetInfoResp(_message.Message):
    __slots__ = ("subscription_info",)
    SUBSCRIPTION_INFO_FIELD_NUMBER: _ClassVar[int]
    subscription_info: SubscriptionInfo
    def __init__(self, subscription_info: _Optional[_Union[SubscriptionInfo, _Mapping]] = ...) -> None: ...

class SubscriptionInfo(_message.Message):
    __slots__ = ("event_source", "group_name", "status", "connections", "average_per_second", "total_items", "count_since_last_measurement", "last_checkpointed_event_position", "last_known_event_position", "resolve_link_tos", "start_from", "message_timeout_milliseconds", "extra_statistics", "max_retry_count", "live_buffer_size", "buffer_size", "read_batch_size", "check_point_after_milliseconds", "min_check_point_count", "max_check_point_count", "read_buffer_count", "live_buffer_count", "retry_buffer_count", "total_in_flight_messages", "outstanding_messages_count", "named_consumer_strategy", "max_subscriber_count", "parked_message_count")
    class ConnectionInfo(_message.Message):
        __slots__ = ("username", "average_items_per_second", "total_items", "count_since_last_measurement", "observed_measurements", "available_slots", "in_flight_messages", "connection_name")
        FROM_FIELD_NUMBER: _ClassVar[int]
        USERNAME_FIELD_NUMBER: _ClassVar[int]
        AVERAGE_ITEMS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
        TOTAL_ITEMS_FIELD_NUMBER: _ClassVar[int]
        COUNT_SINCE_LAST_MEASUREMENT_FIELD_NUMBER: _ClassVar[int]
        OBSERVED_MEASUREMENTS_FIELD_NUMBER: _ClassVar[int]
        AVAILABLE_SLOTS_FIELD_NUMBER: _ClassVar[int]
        IN_FLIGHT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
        CONNECTION_NAME_FIELD_NUMBER: _ClassVar[int]
        username: str
        average_items_per_second: int
        total_items: int
        count_since_last_measurement: int
        observed_measurements: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo.Measurement]
        available_slots: int
        in_flight_messages: int
        connection_name: str
        def __init__(self, username: _Optional[str] = ..., average_items_per_second: _Optional[int] = ..., total_items: _Optional[int] = ..., count_since_last_measurement: _Optional[int] = ..., observed_measurements: _Optional[_Iterable[_Union[SubscriptionInfo.Measurement, _Mapping]]] = ..., available_slots: _Optional[int] = ..., in_flight_messages: _Optional[int] = ..., connection_name: _Optional[str] = ..., **kwargs) -> None: ...
    class Measurement(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    EVENT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ITEMS_FIELD_NUMBER: _ClassVar[int]
    COUNT_SINCE_LAST_MEASUREMENT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHECKPOINTED_EVENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_EVENT_POSITION_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_LINK_TOS_FIELD_NUMBER: _ClassVar[int]
    START_FROM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TIMEOUT_MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_STATISTICS_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    LIVE_BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
    BUFFER_SIZE_FIELD_NUMBER: _ClassVar[int]
    READ_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHECK_POINT_AFTER_MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    MIN_CHECK_POINT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_CHECK_POINT_COUNT_FIELD_NUMBER: _ClassVar[int]
    READ_BUFFER_COUNT_FIELD_NUMBER: _ClassVar[int]
    LIVE_BUFFER_COUNT_FIELD_NUMBER: _ClassVar[int]
    RETRY_BUFFER_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_IN_FLIGHT_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OUTSTANDING_MESSAGES_COUNT_FIELD_NUMBER: _ClassVar[int]
    NAMED_CONSUMER_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MAX_SUBSCRIBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARKED_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    event_source: str
    group_name: str
    status: str
    connections: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo.ConnectionInfo]
    average_per_second: int
    total_items: int
    count_since_last_measurement: int
    last_checkpointed_event_position: str
    last_known_event_position: str
    resolve_link_tos: bool
    start_from: str
    message_timeout_milliseconds: int
    extra_statistics: bool
    max_retry_count: int
    live_buffer_size: int
    buffer_size: int
    read_batch_size: int
    check_point_after_milliseconds: int
    min_check_point_count: int
    max_check_point_count: int
    read_buffer_count: int
    live_buffer_count: int
    retry_buffer_count: int
    total_in_flight_messages: int
    outstanding_messages_count: int
    named_consumer_strategy: str
    max_subscriber_count: int
    parked_message_count: int
    def __init__(self, event_source: _Optional[str] = ..., group_name: _Optional[str] = ..., status: _Optional[str] = ..., connections: _Optional[_Iterable[_Union[SubscriptionInfo.ConnectionInfo, _Mapping]]] = ..., average_per_second: _Optional[int] = ..., total_items: _Optional[int] = ..., count_since_last_measurement: _Optional[int] = ..., last_checkpointed_event_position: _Optional[str] = ..., last_known_event_position: _Optional[str] = ..., resolve_link_tos: bool = ..., start_from: _Optional[str] = ..., message_timeout_milliseconds: _Optional[int] = ..., extra_statistics: bool = ..., max_retry_count: _Optional[int] = ..., live_buffer_size: _Optional[int] = ..., buffer_size: _Optional[int] = ..., read_batch_size: _Optional[int] = ..., check_point_after_milliseconds: _Optional[int] = ..., min_check_point_count: _Optional[int] = ..., max_check_point_count: _Optional[int] = ..., read_buffer_count: _Optional[int] = ..., live_buffer_count: _Optional[int] = ..., retry_buffer_count: _Optional[int] = ..., total_in_flight_messages: _Optional[int] = ..., outstanding_messages_count: _Optional[int] = ..., named_consumer_strategy: _Optional[str] = ..., max_subscriber_count: _Optional[int] = ..., parked_message_count: _Optional[int] = ...) -> None: ...

class ReplayParkedReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("group_name", "stream_identifier", "all", "stop_at", "no_limit")
        GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
        STREAM_IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        STOP_AT_FIELD_NUMBER: _ClassVar[int]
        NO_LIMIT_FIELD_NUMBER: _ClassVar[int]
        group_name: str
        stream_identifier: _shared_pb2.StreamIdentifier
        all: _shared_pb2.Empty
        stop_at: int
        no_limit: _shared_pb2.Empty
        def __init__(self, group_name: _Optional[str] = ..., stream_identifier: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., all: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., stop_at: _Optional[int] = ..., no_limit: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: ReplayParkedReq.Options
    def __init__(self, options: _Optional[_Union[ReplayParkedReq.Options, _Mapping]] = ...) -> None: ...

class ReplayParkedResp(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListReq(_message.Message):
    __slots__ = ("options",)
    class Options(_message.Message):
        __slots__ = ("list_all_subscriptions", "list_for_stream")
        LIST_ALL_SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
        LIST_FOR_STREAM_FIELD_NUMBER: _ClassVar[int]
        list_all_subscriptions: _shared_pb2.Empty
        list_for_stream: ListReq.StreamOption
        def __init__(self, list_all_subscriptions: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ..., list_for_stream: _Optional[_Union[ListReq.StreamOption, _Mapping]] = ...) -> None: ...
    class StreamOption(_message.Message):
        __slots__ = ("stream", "all")
        STREAM_FIELD_NUMBER: _ClassVar[int]
        ALL_FIELD_NUMBER: _ClassVar[int]
        stream: _shared_pb2.StreamIdentifier
        all: _shared_pb2.Empty
        def __init__(self, stream: _Optional[_Union[_shared_pb2.StreamIdentifier, _Mapping]] = ..., all: _Optional[_Union[_shared_pb2.Empty, _Mapping]] = ...) -> None: ...
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    options: ListReq.Options
    def __init__(self, options: _Optional[_Union[ListReq.Options, _Mapping]] = ...) -> None: ...

class ListResp(_message.Message):
    __slots__ = ("subscriptions",)
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo]
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[SubscriptionInfo, _Mapping]]] = ...) -> None: ...
