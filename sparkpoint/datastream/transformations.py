"""Transformations: the job as the DataStream API describes it (Flink's ``Transformation``).

Every ``DataStream`` call adds one immutable transformation to the environment: its id,
name, uid, parallelism, inputs, the user's function(s), output type and what kind of
step it is. Transformations know nothing of runtime operators; the runtime translates
them into its stream graph and job plan (Flink's ``StreamGraphGenerator``). Setting a
uid, a name or a parallelism replaces the transformation with a changed copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from sparkpoint.common.configuration import DEFAULT_MAX_PARALLELISM

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "Partitioning",
    "TransformationInput",
    "Transformation",
    "SourceTransformation",
    "OneInputTransformation",
    "KeyedTransformation",
    "WindowTransformation",
    "UnionTransformation",
    "PartitionTransformation",
    "SideOutputTransformation",
    "SinkTransformation",
    "PrintTransformation",
    "CollectTransformation",
    "TwoInputTransformation",
    "Pipeline",
]


class Partitioning(str, Enum):
    """How records travel from an input to a transformation (Flink's ``StreamPartitioner``s)."""

    FORWARD = "forward"  # same subtask, chained when parallelisms match
    HASH = "hash"  # by key group of the key (key_by)
    GLOBAL = "global"  # everything to subtask 0 (window_all, global())
    REBALANCE = "rebalance"  # round robin (rebalance, shuffle, rescale)
    BROADCAST = "broadcast"  # to every subtask
    CUSTOM = "custom"  # to the subtask a user's Partitioner picks for the record's key (partition_custom)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TransformationInput:
    """One input of a transformation: which one, how partitioned, and which side output of it.

    ``input_index`` is 1 or 2 for the inputs of a two-input transformation, 0 otherwise.
    """

    id: int
    partitioning: Partitioning = Partitioning.FORWARD
    key_selector: Any = None
    side_tag: str | None = None
    input_index: int = 0
    key_type: Any = None  # the key type given to key_by(key_selector, key_type), if any


@dataclass(frozen=True)
class Transformation:
    """One step of the job as written; ``kind`` says what step it is."""

    id: int
    name: str
    inputs: tuple[TransformationInput, ...] = ()
    uid: str | None = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    output_type: Any = None

    kind = "transformation"
    keyed = False  # runs on keyed state: fed by key_by (or window_all)


@dataclass(frozen=True)
class SourceTransformation(Transformation):
    """A source (Flink's ``SourceTransformation``): the connector and its watermark strategy."""

    source: Any = None
    watermark_strategy: Any = None

    kind = "source"


@dataclass(frozen=True)
class OneInputTransformation(Transformation):
    """A stateless step on one input: ``operation`` is map, flat_map, filter, process or assign_timestamps.

    ``function`` is the user's function object (``watermark_strategy`` for assign_timestamps).
    """

    operation: str = "map"
    function: Any = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        """The operation's name (map, flat_map, filter, process, assign_timestamps)."""
        return self.operation


@dataclass(frozen=True)
class KeyedTransformation(Transformation):
    """A step on a keyed stream: ``operation`` is keyed_process, map, flat_map, filter or reduce."""

    operation: str = "keyed_process"
    function: Any = None
    key_selector: Any = None

    keyed = True

    @property
    def kind(self) -> str:  # type: ignore[override]
        """The operation's name (keyed_process, map, flat_map, filter, reduce)."""
        return self.operation


@dataclass(frozen=True)
class TwoInputTransformation(Transformation):
    """A step on two inputs (``connect``): ``operation`` is co_process, keyed_co_process, broadcast_process or
    keyed_broadcast_process. Input 1 is the first (or non-broadcast) stream, input 2 the second (or broadcast)
    one; keyed operations carry each input's key selector on its input. ``broadcast_state_descriptors`` are the
    ``MapStateDescriptor``s of the broadcast state."""

    operation: str = "co_process"
    function: Any = None
    broadcast_state_descriptors: tuple = ()

    @property
    def kind(self) -> str:  # type: ignore[override]
        """The operation's name (co_process, keyed_co_process, broadcast_process, keyed_broadcast_process)."""
        return self.operation

    @property
    def keyed(self) -> bool:  # type: ignore[override]
        """Whether the operation is keyed: its inputs are partitioned by key."""
        return self.operation.startswith("keyed_")


@dataclass(frozen=True)
class WindowTransformation(Transformation):
    """A window over a keyed stream (``keyed``) or over the whole stream (``window_all``).

    ``function_kind`` is reduce, aggregate, process or apply; ``window_function`` is the
    user's window function (None for reduce/aggregate without one). A ``trigger`` of None
    means the assigner's default trigger.
    """

    assigner: Any = None
    trigger: Any = None
    evictor: Any = None
    allowed_lateness: int = 0
    late_tag: Any = None
    function_kind: str = "process"
    window_function: Any = None
    reduce_function: Any = None
    aggregate_function: Any = None
    key_selector: Any = None
    keyed_stream: bool = True

    kind = "window"
    keyed = True


@dataclass(frozen=True)
class UnionTransformation(Transformation):
    """The union of its inputs."""

    kind = "union"


@dataclass(frozen=True)
class PartitionTransformation(Transformation):
    """A repartitioning of its input (rebalance, broadcast, global, ...): records pass unchanged."""

    kind = "partition"


@dataclass(frozen=True)
class SideOutputTransformation(Transformation):
    """The records its input emitted to one side output (the input's ``side_tag``)."""

    kind = "side_output"


@dataclass(frozen=True)
class SinkTransformation(Transformation):
    """A sink (Flink's ``SinkTransformation``): the connector that writes the records."""

    sink: Any = None

    kind = "sink"


@dataclass(frozen=True)
class PrintTransformation(Transformation):
    """``print()``: records to standard output, prefixed by ``sink_identifier``."""

    sink_identifier: str | None = None
    type_info: Any = None

    kind = "print"


@dataclass(frozen=True)
class CollectTransformation(Transformation):
    """``execute_and_collect()``: records back to the caller."""

    kind = "collect"


@dataclass(frozen=True)
class Pipeline:
    """What ``execute()`` hands to an executor: the job's transformations and settings.

    ``transformations`` are in the order they were added (inputs first).
    ``state_backend`` is the configured state backend object, or its name.
    ``python_files`` must be importable by user functions wherever they run.
    """

    job_name: str
    transformations: tuple[Transformation, ...]
    parallelism: int
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    runtime_mode: str = "STREAMING"
    job_parameters: dict = field(default_factory=dict)
    state_backend: Any = None
    python_files: tuple[str, ...] = ()
