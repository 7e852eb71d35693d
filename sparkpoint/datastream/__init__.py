"""PyFlink-compatible DataStream API: ``from sparkpoint.datastream import ...``."""

from sparkpoint.datastream.checkpoint_config import (
    CheckpointConfig,
    CheckpointingMode,
    CheckpointStorage,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
)
from sparkpoint.datastream.data_stream import (
    AllWindowedStream,
    BroadcastConnectedStream,
    BroadcastStream,
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    WindowedStream,
)
from sparkpoint.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    BroadcastProcessFunction,
    CheckpointedFunction,
    CheckpointListener,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessAllWindowFunction,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    TimerService,
    WindowFunction,
)
from sparkpoint.datastream.output_tag import OutputTag
from sparkpoint.datastream.failed_records import FAILED_RECORDS, FailedRecord
from sparkpoint.datastream.state_backend import (
    EmbeddedRocksDBStateBackend,
    FsStateBackend,
    HashMapStateBackend,
    MemoryStateBackend,
    StateBackend,
)
from sparkpoint.datastream.stream_execution_environment import (
    ExecutionConfig,
    JobClient,
    JobStatus,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    TimeCharacteristic,
)
from sparkpoint.datastream.time_domain import TimeDomain
from sparkpoint.datastream.window import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)

__all__ = [
    "StreamExecutionEnvironment", "DataStream", "KeyedStream", "WindowedStream", "AllWindowedStream",
    "DataStreamSink", "OutputTag", "FAILED_RECORDS", "FailedRecord", "CheckpointConfig", "CheckpointingMode",
    "CheckpointStorage",
    "ExternalizedCheckpointCleanup", "ExternalizedCheckpointRetention", "RuntimeExecutionMode",
    "TimeCharacteristic", "TimeDomain", "JobClient", "JobStatus", "ExecutionConfig",
    "StateBackend", "HashMapStateBackend", "MemoryStateBackend", "FsStateBackend", "EmbeddedRocksDBStateBackend",
    "MapFunction", "FlatMapFunction", "FilterFunction", "KeySelector", "ReduceFunction", "AggregateFunction",
    "ProcessFunction", "KeyedProcessFunction", "ProcessWindowFunction", "ProcessAllWindowFunction",
    "WindowFunction", "AllWindowFunction", "RuntimeContext", "TimerService", "CheckpointedFunction",
    "CheckpointListener", "SinkFunction", "SourceFunction", "CoMapFunction", "CoFlatMapFunction",
    "CoProcessFunction", "KeyedCoProcessFunction", "BroadcastProcessFunction", "KeyedBroadcastProcessFunction",
    "ConnectedStreams", "BroadcastStream", "BroadcastConnectedStream",
    "TumblingEventTimeWindows", "TumblingProcessingTimeWindows", "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows", "EventTimeSessionWindows", "ProcessingTimeSessionWindows", "GlobalWindows",
    "CountTumblingWindowAssigner", "CountSlidingWindowAssigner", "TimeWindow", "CountWindow", "Trigger",
    "TriggerResult", "WindowAssigner",
]
