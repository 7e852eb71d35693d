"""The state processor API: checkpoints and savepoints as Spark DataFrames, and back.

``SavepointReader.read(spark, path).read_keyed_state(uid, state_name)`` gives any keyed
state (window contents and timers included) as a DataFrame; ``SavepointWriter`` writes a
new savepoint from DataFrames (bootstrap) or from an existing one with changes.
"""

from sparkpoint.state_processor.reader import SavepointReader
from sparkpoint.state_processor.writer import SavepointWriter

__all__ = ["SavepointReader", "SavepointWriter"]
