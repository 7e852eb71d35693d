"""The sinks ``bench/soak.py`` runs the seed job against, each read as its own reader sees it.

- ``file``: text part files (``examples/behavior_counts.py --output``); committed parts
  only (hidden staged files excluded).
- ``parquet``: Parquet part files (``--parquet``), the visible ones, read with pyarrow.
- ``kafka``: the seed's Kafka mode: events produced into a 4-partition topic first, the
  window counts written to a 2-partition topic with EXACTLY_ONCE transactions and read
  by a ``read_committed`` consumer. The broker is the test suite's
  (``tests.servers.kafka_server``).
- ``jdbc``: rows of a PostgreSQL table written with prepared transactions (``--jdbc-url``),
  read with ``SELECT``; the server is the test suite's (``tests.servers.postgres_server``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

from sparkpoint.connectors.events import EventSpec, generate_events
from sparkpoint.testing.kill_loop import read_committed_lines

SINKS = ("file", "parquet", "kafka", "jdbc")
TABLE = "(window_start bigint, window_end bigint, channel text, behavior text, cnt bigint)"


class SoakSink:
    """Where the seed job writes (``tag``: ``soak``) and how its output reads back."""

    name = "file"
    file_based = True  # the output is part files under the output directory

    def start(self, workdir: Path, events: int) -> None:
        """Start servers and create what the job writes into."""

    def job_args(self, events: int, out: Path, tag: str) -> list[str]:
        return ["--events", str(events), "--output", str(out)]

    def read(self, out: Path) -> Counter:
        """The committed output as ``start\\tend\\tchannel\\tbehavior\\tcount`` lines."""
        return Counter(read_committed_lines(out)) if out.exists() else Counter()

    def leftovers(self, out: Path) -> dict[str, int]:
        """What a clean end leaves none of (staged files, open transactions)."""
        return {"staged part files": len(list(out.rglob(".*inprogress*"))) if out.exists() else 0}

    def describe(self) -> str:
        return "text part files, committed parts only"

    def close(self) -> None:
        """Stop the servers."""


class ParquetSink(SoakSink):
    name = "parquet"

    def job_args(self, events: int, out: Path, tag: str) -> list[str]:
        return [*super().job_args(events, out, tag), "--parquet"]

    def read(self, out: Path) -> Counter:
        import pyarrow.parquet as pq

        lines: Counter = Counter()
        if not out.exists():
            return lines
        for path in sorted(out.rglob("*")):
            if path.is_file() and not any(p.startswith((".", "_")) for p in path.relative_to(out).parts):
                for r in pq.read_table(path).to_pylist():
                    lines[f"{r['window_start']}\t{r['window_end']}\t{r['channel']}\t{r['behavior']}\t{r['cnt']}"] += 1
        return lines

    def describe(self) -> str:
        return "Parquet part files, committed parts only, read with pyarrow"


class KafkaSoakSink(SoakSink):
    name = "kafka"
    file_based = False

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.server: Any = None

    def start(self, workdir: Path, events: int) -> None:
        from tests.servers.kafka_server import KafkaServer

        self.server = self._stack.enter_context(KafkaServer())
        self.server.create_topic("events", partitions=4)
        self.server.create_topic("counts-soak", partitions=2)
        chunk = 1_000_000
        for start in range(0, events, chunk):  # each partition in timestamp order, as in the Kafka tests
            lines, _ = generate_events(start, min(events, start + chunk), EventSpec())
            for p in range(4):
                self.server.produce("events", lines[p::4], partition=p)

    def job_args(self, events: int, out: Path, tag: str) -> list[str]:
        return [
            "--kafka",
            self.server.bootstrap_servers,
            "--input-topic",
            "events",
            "--output-topic",
            f"counts-{tag}",
            "--bounded",
        ]

    def read(self, out: Path) -> Counter:
        from tests.servers.kafka_server import read_topic

        return Counter(
            v.decode()
            for *_, v in read_topic(self.server.bootstrap_servers, "counts-soak", "read_committed", idle_seconds=5.0)
        )

    def leftovers(self, out: Path) -> dict[str, int]:
        return {}  # an open transaction would hold read_committed back: lines missing

    def describe(self) -> str:
        return "Kafka topic counts-soak (2 partitions), read_committed; source: topic events (4 partitions)"

    def close(self) -> None:
        from sparkpoint.connectors.kafka.clients import close_cached_clients

        close_cached_clients()
        self._stack.close()


class JdbcSoakSink(SoakSink):
    name = "jdbc"
    file_based = False

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self.server: Any = None

    def start(self, workdir: Path, events: int) -> None:
        from tests.servers.postgres_server import PostgresServer

        self.server = self._stack.enter_context(PostgresServer())
        self.server.create_database("soak")
        with self.server.connect("soak") as conn:
            conn.execute(f"CREATE TABLE counts_soak {TABLE}")

    def job_args(self, events: int, out: Path, tag: str) -> list[str]:
        return [
            "--events",
            str(events),
            "--jdbc-url",
            self.server.jdbc_url("soak") + "?user=postgres",
            "--table",
            f"counts_{tag}",
        ]

    def read(self, out: Path) -> Counter:
        with self.server.connect("soak") as conn:
            rows = conn.execute("SELECT window_start, window_end, channel, behavior, cnt FROM counts_soak").fetchall()
        return Counter("\t".join(str(v) for v in row) for row in rows)

    def prepared(self, prefix: str | None = None) -> list[str]:
        with self.server.connect("soak") as conn:
            gids = [
                g
                for (g,) in conn.execute(
                    "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"
                ).fetchall()
            ]
        return [g for g in gids if prefix is None or g.startswith(prefix)]

    def leftovers(self, out: Path) -> dict[str, int]:
        return {"prepared transactions": len(self.prepared())}

    def describe(self) -> str:
        return "PostgreSQL table counts_soak (prepared transactions), read with SELECT"

    def close(self) -> None:
        self._stack.close()


def make_sink(name: str) -> SoakSink:
    return {"file": SoakSink, "parquet": ParquetSink, "kafka": KafkaSoakSink, "jdbc": JdbcSoakSink}[name]()
