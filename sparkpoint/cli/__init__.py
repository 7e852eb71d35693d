"""The ``sparkpoint`` command, modelled on Flink's ``bin/flink``.

``sparkpoint run job.py [args]`` (or ``-py job.py``, ``-pym module``) runs a job script as
``__main__`` with those args, as ``flink run`` does, applying ``--master``, ``-D key=value``
and ``--config-file FILE`` (Flink's config.yaml keys) to every environment the script creates.
It prints the job id; on a terminal it shows live progress, in a pipe one plain log line per
epoch. ``info`` plans a job without running it; ``list``, ``cancel``, ``savepoint``, ``stop``,
``checkpoint`` and ``checkpoints`` control a running job over its REST endpoint; ``inspect``
reads a checkpoint or savepoint; ``history-server`` serves ended jobs' archives.
"""

from sparkpoint.cli import control, history, inspection, jobs  # noqa: F401  (they register the commands)
from sparkpoint.cli.group import main

__all__ = ["main"]
