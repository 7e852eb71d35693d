"""``CheckpointingMode``, where PyFlink has it (``pyflink.datastream.checkpointing_mode``)."""

from sparkpoint.datastream.checkpoint_config import CheckpointingMode

__all__ = ["CheckpointingMode"]
