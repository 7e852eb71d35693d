"""The job's REST endpoint (Flink's ``/jobs`` API, a subset) and the local job registry."""
