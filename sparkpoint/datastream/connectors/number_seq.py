"""``NumberSequenceSource``, where PyFlink has it (``pyflink.datastream.connectors.number_seq``)."""

from sparkpoint.datastream.connectors.generator import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
