"""Continuous mode: long-running tasks, records and checkpoint barriers flowing between them.

``sparkpoint.execution.mode: continuous`` runs a job as one set of long-running tasks per job attempt: one *slot*
per subtask index, slot *i* running subtask *i* of every stage (Flink's slot sharing), each stage's subtask a
thread with its chained operators (:mod:`~sparkpoint.runtime.continuous.stream_task`). Records travel between
subtasks over channels (:mod:`~sparkpoint.runtime.continuous.channels`: in this process a bounded queue, between
processes a TCP connection per channel), batched and flushed when full, when the sender has nothing more to read,
or after ``execution.buffer-timeout``. Checkpoint barriers travel with them, as the seeds describe: the driver
asks the sources for a barrier, a subtask with several input channels aligns it, reports to the driver and
forwards it (:mod:`~sparkpoint.runtime.continuous.scheduler`).
"""
