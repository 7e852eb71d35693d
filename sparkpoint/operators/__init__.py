"""Runtime operators: what runs inside a task (Flink's streaming.api.operators)."""
