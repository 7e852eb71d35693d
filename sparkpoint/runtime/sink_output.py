"""Before the first epoch: each sink sees the output its job starts from.

A job restored from a checkpoint older than the newest one retained next to it replays the
epochs in between, and sinks that committed their output would hold it twice. The driver
tells every sink where the job starts (:class:`~sparkpoint.connectors.base.OutputStart`):
the restored checkpoint, its sink writer states, the newer completed checkpoints in its job
directory and what the user asked for (``sparkpoint.restore.rollback``: ``off``, ``move``
or ``delete``, with ``sparkpoint.restore.rollback-dir``; ``sparkpoint.sink.if-output-not-empty``:
``append`` or ``fail``). The sink rolls back or warns (``Sink.prepare_output``).
"""

from __future__ import annotations

import logging
import posixpath
import re

from sparkpoint.checkpoint.loader import RestoredCheckpoint
from sparkpoint.checkpoint.metadata import MetadataV1Serializer
from sparkpoint.common.configuration import Configuration
from sparkpoint.connectors.base import ROLLBACK_MODES, OutputStart, Sink
from sparkpoint.errors import ConfigurationError, SparkpointError
from sparkpoint.runtime.graph import JobPlan
from sparkpoint.storage.checkpoint_storage import METADATA_FILE_NAME
from sparkpoint.storage.file_systems import open_file_system

__all__ = ["prepare_sink_outputs", "newer_checkpoints"]

logger = logging.getLogger(__name__)

ROLLBACK_KEY = "sparkpoint.restore.rollback"
ROLLBACK_DIR_KEY = "sparkpoint.restore.rollback-dir"
IF_NOT_EMPTY_KEY = "sparkpoint.sink.if-output-not-empty"
_CHK = re.compile(r"^chk-(\d+)$")


def _choice(config: Configuration, key: str, choices: tuple[str, ...], default: str) -> str:
    value = str(config.get_string(key) or default).strip().lower()
    if value not in choices:
        raise ConfigurationError(f"{key}: {value!r} is not one of {', '.join(choices)}")
    return value


def prepare_sink_outputs(
    plan: JobPlan, job_id: str, config: Configuration, restored: RestoredCheckpoint | None
) -> None:
    """Show every sink of the job the output it starts from (after a restore's recommit)."""
    rollback = _choice(config, ROLLBACK_KEY, ROLLBACK_MODES, "off")
    if_not_empty = _choice(config, IF_NOT_EMPTY_KEY, ("append", "fail"), "append")
    newer = newer_checkpoints(restored) if restored is not None else ()
    operator_states = restored.driver_state.get("operator_states", {}) if restored is not None else {}
    for nid in plan.sink_nodes():
        sink = plan.nodes[nid].sink
        if not isinstance(sink, Sink):  # (a sink given to sink_to may be any object with the writer methods)
            continue
        uid = plan.uid(nid)
        per_subtask = operator_states.get(uid, {})
        start = OutputStart(
            sink_uid=uid,
            job_id=job_id,
            checkpoint_id=restored.checkpoint_id if restored is not None else None,
            checkpoint_job_id=restored.metadata.job_id if restored is not None else None,
            barrier_epoch=restored.metadata.barrier_epoch if restored is not None else None,
            writer_states={i: s.get("writer") for i, s in per_subtask.items() if isinstance(s, dict)},
            newer_checkpoints=newer,
            rollback=rollback,
            rollback_dir=config.get_string(ROLLBACK_DIR_KEY),
            if_not_empty=if_not_empty,
        )
        sink.prepare_output(start)


def newer_checkpoints(restored: RestoredCheckpoint) -> tuple[tuple[int, int], ...]:
    """``(id, barrier epoch)`` of the completed checkpoints after ``restored`` in its job directory.

    Empty for a savepoint (not a ``chk-N`` directory). A newer checkpoint that cannot be read
    is left out (it completed nothing a sink could have committed after it was damaged).
    """
    fs, path = open_file_system(restored.location, restored.storage_options)
    path = path.rstrip("/")
    if not _CHK.match(posixpath.basename(path)):
        return ()
    job_dir = posixpath.dirname(path)
    out = []
    try:
        entries = fs.ls(job_dir, detail=False)
    except OSError as e:
        logger.warning("cannot list the job directory %s of checkpoint %d: %s", job_dir, restored.checkpoint_id, e)
        return ()
    for entry in entries:
        m = _CHK.match(posixpath.basename(str(entry).rstrip("/")))
        if m is None or int(m.group(1)) <= restored.checkpoint_id:
            continue
        metadata = posixpath.join(job_dir, m.group(0), METADATA_FILE_NAME)
        try:
            newer = MetadataV1Serializer.deserialize(fs.cat_file(metadata), fs.unstrip_protocol(metadata))
        except (SparkpointError, OSError) as e:  # incomplete (no _metadata) or damaged
            logger.debug("newer checkpoint %s not counted: %s", metadata, e)
            continue
        out.append((newer.checkpoint_id, newer.barrier_epoch))
    return tuple(sorted(out))
