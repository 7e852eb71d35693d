"""PyFlink's :class:`FileSink` (``pyflink.datastream.connectors.file_system``, re-exported there).

.. code-block:: python

    sink = (FileSink.for_row_format("out/", Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_prefix("counts").build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=64 * 1024 * 1024))
            .build())
    parquet = FileSink.for_bulk_format("out/", ParquetBulkWriters.for_row_type(row_type)).build()

The sink writes hidden in-progress files (``.part-<uid>-<subtask>-<n>.inprogress.<attempt>``) and
renames them to ``part-<uid>-<subtask>-<n>`` when the epoch (with checkpointing: the
checkpoint) that wrote them completes, so readers of the output only ever see committed
data. Part file names come from an :class:`OutputFileConfig`, sub-directories from a
:class:`BucketAssigner`, rolling within an epoch from a :class:`RollingPolicy`. Bulk formats
(Parquet, :mod:`sparkpoint.datastream.formats.parquet`) write one file per bucket and epoch
task: they roll on checkpoints only.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sparkpoint.common.java_time import java_formatter, java_zone
from sparkpoint.connectors.base import Committer, OutputStart, Sink, SinkWriter
from sparkpoint.connectors.file_output import part_job, prepare_file_output
from sparkpoint.connectors.file_sink import BulkWriterFactory
from sparkpoint.connectors.files import FileCommitter, FileSinkWriter, PartFileConfig

__all__ = [
    "FileSink",
    "OutputFileConfig",
    "RollingPolicy",
    "DefaultRollingPolicy",
    "OnCheckpointRollingPolicy",
    "BucketAssigner",
]

logger = logging.getLogger(__name__)


class OutputFileConfig:
    """Part file name prefix and suffix: ``<prefix>-<uid>-<subtask>-<counter><suffix>``."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = ""):
        if "/" in part_prefix or "/" in part_suffix:
            raise ValueError("part prefix and suffix may not contain '/'")
        self._prefix, self._suffix = part_prefix, part_suffix

    @staticmethod
    def builder() -> OutputFileConfig.OutputFileConfigBuilder:
        """Returns a builder of ``OutputFileConfig``."""
        return OutputFileConfig.OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        """Returns the part file name prefix (``part`` unless set)."""
        return self._prefix

    def get_part_suffix(self) -> str:
        """Returns the part file name suffix (empty unless set)."""
        return self._suffix

    class OutputFileConfigBuilder:
        """Builds an :class:`OutputFileConfig`."""

        def __init__(self) -> None:
            self._prefix, self._suffix = "part", ""

        def with_part_prefix(self, prefix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            """Sets the part file name prefix.

            Args:
                prefix: The prefix; it may not contain ``/``.
            """
            self._prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            """Sets the part file name suffix.

            Args:
                suffix: The suffix, such as ``.txt``; it may not contain ``/``.
            """
            self._suffix = suffix
            return self

        def build(self) -> OutputFileConfig:
            """Returns the ``OutputFileConfig``.

            Raises:
                ValueError: If the prefix or suffix contains ``/``.
            """
            return OutputFileConfig(self._prefix, self._suffix)


class RollingPolicy:
    """When a part file is closed and a new one started.

    Every epoch closes its files (each task stages its own), so files also roll at every
    epoch boundary; a policy adds rolling within an epoch.
    """

    part_size: int | None = None
    rollover_interval: int | None = None

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128, rollover_interval: int = 60 * 1000, inactivity_interval: int = 60 * 1000
    ) -> DefaultRollingPolicy:
        """Roll when a file is larger than ``part_size`` bytes or older than
        ``rollover_interval`` ms; ``inactivity_interval`` is accepted (files never outlive
        their epoch, so they are never inactive)."""
        return DefaultRollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> OnCheckpointRollingPolicy:
        """Roll only at epoch (checkpoint) boundaries."""
        return OnCheckpointRollingPolicy()


class DefaultRollingPolicy(RollingPolicy):
    """Rolls on size and age (see :meth:`RollingPolicy.default_rolling_policy`)."""

    def __init__(self, part_size: int, rollover_interval: int, inactivity_interval: int):
        if part_size <= 0 or rollover_interval <= 0 or inactivity_interval <= 0:
            raise ValueError("part_size, rollover_interval and inactivity_interval must be positive")
        self.part_size, self.rollover_interval, self.inactivity_interval = (
            part_size,
            rollover_interval,
            inactivity_interval,
        )


class OnCheckpointRollingPolicy(RollingPolicy):
    """Rolls at every epoch (checkpoint) boundary only."""


class BucketAssigner:
    """Which sub-directory (bucket) of the base path a record goes to; ``""`` is the base path."""

    def get_bucket_id(self, value: Any, now_ms: int) -> str:
        """The bucket of ``value``, written at processing time ``now_ms`` (epoch ms)."""
        return ""

    def depends_on_record(self) -> bool:
        """Whether the bucket may depend on the record (a subclass's may; the base path's and the date-time
        assigner's depend on the time only, so the sink writes a batch of records at once)."""
        return type(self).get_bucket_id not in (BucketAssigner.get_bucket_id, _DateTimeBucketAssigner.get_bucket_id)

    @staticmethod
    def base_path_bucket_assigner() -> BucketAssigner:
        """Everything goes to the base path itself."""
        return BucketAssigner()

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None) -> BucketAssigner:
        """One bucket per processing-time period, named with ``format_str`` (a Java pattern
        as in Flink, or a ``strftime`` pattern) in ``timezone_id`` (default: the local zone)."""
        return _DateTimeBucketAssigner(format_str, timezone_id)


def _strftime(pattern: str) -> Any:
    return lambda t: t.strftime(pattern)


class _DateTimeBucketAssigner(BucketAssigner):
    """Buckets by processing time (Flink's ``DateTimeBucketAssigner``)."""

    def __init__(self, format_str: str, timezone_id: str | None):
        self.format_str = format_str
        self.timezone_id = timezone_id
        self._tz = java_zone(timezone_id) if timezone_id is not None else None  # Java's ids: "GMT+8" too
        self._format = _strftime(format_str) if "%" in format_str else java_formatter(format_str)
        self._last: tuple[int | None, str] = (None, "")  # the last processing time and its bucket

    def get_bucket_id(self, value: Any, now_ms: int) -> str:
        if self._last[0] == now_ms:  # a task writes its records at one processing time: formatted once
            return self._last[1]
        bucket = self._format(datetime.fromtimestamp(now_ms / 1000, self._tz))
        self._last = (now_ms, bucket)
        return bucket


class FileSink(Sink):
    """A sink writing part files under a base path, exactly once (two-phase commit)."""

    name = "FileSink"

    def __init__(
        self,
        base_path: str,
        encoder: Any,
        bucket_assigner: BucketAssigner,
        output_file_config: OutputFileConfig,
        rolling_policy: RollingPolicy,
    ):
        self.base_path = str(base_path)
        self.encoder = encoder
        self.bucket_assigner = bucket_assigner
        self.output_file_config = output_file_config
        self.rolling_policy = rolling_policy

    @staticmethod
    def for_row_format(base_path: str, encoder: Any) -> FileSink.RowFormatBuilder:
        """A builder for a sink encoding each record with ``encoder`` (e.g.
        ``Encoder.simple_string_encoder()``: one line per record)."""
        return FileSink.RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: BulkWriterFactory) -> FileSink.BulkFormatBuilder:
        """A builder for a sink writing files of a bulk format with ``writer_factory`` (e.g.
        ``ParquetBulkWriters.for_row_type(row_type)``); such files roll on checkpoints only."""
        if not isinstance(writer_factory, BulkWriterFactory):
            raise TypeError(
                f"for_bulk_format needs a bulk writer factory (ParquetBulkWriters.for_row_type(...)), "
                f"got {writer_factory!r}"
            )
        return FileSink.BulkFormatBuilder(base_path, writer_factory)

    def with_record_type(self, record_type: Any) -> FileSink:
        """This sink for a stream of ``record_type``: its encoder writes records as PyFlink's would."""
        with_type = getattr(self.encoder, "with_record_type", None)
        if with_type is None or record_type is None:
            return self
        return FileSink(
            self.base_path, with_type(record_type), self.bucket_assigner, self.output_file_config, self.rolling_policy
        )

    def _config(self) -> PartFileConfig:
        return PartFileConfig(
            self.base_path,
            self.encoder,
            self.bucket_assigner,
            self.output_file_config.get_part_prefix(),
            self.output_file_config.get_part_suffix(),
            self.rolling_policy.part_size,
            self.rolling_policy.rollover_interval,
        )

    def create_writer(self, subtask: int, parallelism: int, job_id: str, epoch: int, state: Any) -> SinkWriter:
        """Returns a subtask's writer, which stages hidden in-progress part files.

        Args:
            subtask: The subtask's index.
            parallelism: The sink's parallelism.
            job_id: The job's id.
            epoch: The first epoch it writes.
            state: The writer's state from the checkpoint restored, or ``None``.
        """
        return FileSinkWriter(self._config(), subtask, job_id, state)

    def part_files(self) -> tuple[str, str]:
        """Its base path and part prefix (see :meth:`Sink.part_files`)."""
        return self.base_path, self.output_file_config.get_part_prefix()

    def recover(self, committables: list, writer_states: dict[int, Any]) -> None:
        """Remove staged files of an aborted attempt (called on restore, after re-committing)."""
        jobs = {st["job"] for st in writer_states.values() if isinstance(st, dict) and "job" in st}
        self._remove_staged(committables, jobs)

    def recover_from_start(self, job_id: str) -> None:
        """Remove the staged files of the failed attempts of ``job_id``, which starts over with no state."""
        self._remove_staged([], {part_job(job_id)})

    def _remove_staged(self, committables: list, jobs: set[str]) -> None:
        from sparkpoint.connectors.files import cleanup_leftovers

        deleted = cleanup_leftovers(self.base_path, self.output_file_config.get_part_prefix(), committables, jobs)
        if deleted:
            logger.info("removed %d staged part file(s) of an aborted attempt under %s", len(deleted), self.base_path)

    def prepare_output(self, start: OutputStart) -> None:
        """Roll back (or warn of) part files committed after a restored checkpoint; warn of other jobs' files."""
        prepare_file_output(
            start, self.base_path, self.output_file_config.get_part_prefix(), self.output_file_config.get_part_suffix()
        )

    def create_committer(self) -> Committer | None:
        """Returns the committer that makes staged part files visible when a checkpoint completes."""
        return FileCommitter()

    class RowFormatBuilder:
        """Configures a row-format :class:`FileSink`."""

        def __init__(self, base_path: str, encoder: Any):
            self._base_path, self._encoder = base_path, encoder
            self._bucket_assigner = BucketAssigner.date_time_bucket_assigner()
            self._output_file_config = OutputFileConfig()
            self._rolling_policy: RollingPolicy = RollingPolicy.default_rolling_policy()

        def with_bucket_assigner(self, bucket_assigner: BucketAssigner) -> FileSink.RowFormatBuilder:
            """Sets how records are put into bucket directories (hourly date-time buckets unless set).

            Args:
                bucket_assigner: A ``BucketAssigner``.
            """
            self._bucket_assigner = bucket_assigner
            return self

        def with_bucket_check_interval(self, interval: int) -> FileSink.RowFormatBuilder:
            """Accepted for PyFlink compatibility: files are checked at every write."""
            return self

        def with_output_file_config(self, output_file_config: OutputFileConfig) -> FileSink.RowFormatBuilder:
            """Sets the part files' name prefix and suffix.

            Args:
                output_file_config: An ``OutputFileConfig``.
            """
            self._output_file_config = output_file_config
            return self

        def with_rolling_policy(self, rolling_policy: RollingPolicy) -> FileSink.RowFormatBuilder:
            """Sets when part files roll within an epoch (files also roll at every epoch's end).

            Args:
                rolling_policy: A ``RollingPolicy``.
            """
            self._rolling_policy = rolling_policy
            return self

        def build(self) -> FileSink:
            """Returns the ``FileSink``."""
            return FileSink(
                self._base_path, self._encoder, self._bucket_assigner, self._output_file_config, self._rolling_policy
            )

    class BulkFormatBuilder(RowFormatBuilder):
        """Configures a bulk-format :class:`FileSink`: as a row format, but rolling on checkpoints only."""

        def __init__(self, base_path: str, writer_factory: BulkWriterFactory):
            super().__init__(base_path, writer_factory)
            self._rolling_policy = OnCheckpointRollingPolicy()

        def with_rolling_policy(self, rolling_policy: RollingPolicy) -> FileSink.BulkFormatBuilder:
            """Only ``RollingPolicy.on_checkpoint_rolling_policy()``: bulk files roll on checkpoints."""
            if not isinstance(rolling_policy, OnCheckpointRollingPolicy):
                raise ValueError(
                    f"bulk formats roll on checkpoints only: use "
                    f"RollingPolicy.on_checkpoint_rolling_policy(), not {type(rolling_policy).__name__}"
                )
            self._rolling_policy = rolling_policy
            return self
