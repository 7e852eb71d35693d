"""Flink 2.x and 1.x spellings of a setting are one setting; unknown keys are named with the nearest known one."""

from __future__ import annotations

import logging
import time

from sparkpoint.common import Configuration
from sparkpoint.common.config_keys import ALIASES, KNOWN_KEYS, KNOWN_PREFIXES, nearest_key, warn_unknown_keys


def test_either_spelling_reads_as_the_setting():
    conf = Configuration(
        {
            "execution.checkpointing.dir": "file:///a",
            "state.savepoints.dir": "file:///b",
            "execution.state-recovery.path": "/sp",
            "execution.checkpointing.num-retained": 3,
        }
    )
    assert conf.get("state.checkpoints.dir") == "file:///a" == conf.get("execution.checkpointing.dir")
    assert conf.get("execution.checkpointing.savepoint-dir") == "file:///b"
    assert conf.get_string("execution.savepoint.path") == "/sp"
    assert conf.get_integer("state.checkpoints.num-retained") == 3
    assert "state.checkpoints.dir" in conf and conf.contains_key("execution.checkpointing.dir")


def test_the_flink_2_spelling_wins_a_conflict_whatever_the_order(caplog):
    for order in (
        (("state.backend", "hashmap"), ("state.backend.type", "rocksdb")),
        (("state.backend.type", "rocksdb"), ("state.backend", "hashmap")),
    ):
        conf = Configuration()
        with caplog.at_level(logging.WARNING):
            for k, v in order:
                conf.set(k, v)
        assert conf.get("state.backend") == "rocksdb" == conf.get("state.backend.type")
    for order in (
        (("state.checkpoints.dir", "file:///old"), ("execution.checkpointing.dir", "file:///new")),
        (("execution.checkpointing.dir", "file:///new"), ("state.checkpoints.dir", "file:///old")),
    ):
        conf = Configuration(dict(order))
        assert conf.get("state.checkpoints.dir") == "file:///new" == conf.get("execution.checkpointing.dir")
    assert "'state.checkpoints.dir' = 'file:///old' is ignored" in caplog.text


def test_a_later_source_replaces_a_setting_whatever_its_spelling():
    from sparkpoint.common.config_keys import override

    from_file = {"execution.checkpointing.dir": "file:///file", "execution.checkpointing.interval": "1 s"}
    merged = override(from_file, {"state.checkpoints.dir": "file:///dynamic"})
    assert merged == {"execution.checkpointing.interval": "1 s", "state.checkpoints.dir": "file:///dynamic"}
    assert Configuration(merged).get("execution.checkpointing.dir") == "file:///dynamic"


def test_a_typo_is_warned_of_with_the_nearest_key(caplog):
    with caplog.at_level(logging.WARNING, logger="sparkpoint.common.config_keys"):
        warned = warn_unknown_keys(
            [
                "execution.checkpointing.intervall",
                "state.checkpoints.dir",
                "spark.master",
                "state.backend.rocksdb.thread.num",
                "metrics.reporter.prom.port",
                "sparkpoint.local-state-dir",
                "execution.checkpointing.dir",
            ]
        )
    assert warned == ["execution.checkpointing.intervall"]
    assert "did you mean 'execution.checkpointing.interval'" in caplog.text
    assert warn_unknown_keys(["execution.checkpointing.intervall"]) == []  # once per key
    assert nearest_key("rest.prot") == "rest.port"


def test_every_key_the_code_reads_is_known():
    """The registry must not flag a real key: every configuration key literal in sparkpoint's sources is known."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "sparkpoint"
    pattern = re.compile(
        r'"((?:execution|state|pipeline|rest|restart-strategy|parallelism|metrics|security|python)'
        r'\.[a-zA-Z0-9._-]+[a-zA-Z0-9])"'
    )
    found = {m for path in root.rglob("*.py") for m in pattern.findall(path.read_text())}
    unknown = sorted(k for k in found if k not in KNOWN_KEYS and not k.startswith(KNOWN_PREFIXES) and k not in ALIASES)
    assert unknown == [], unknown
    assert all(k in KNOWN_KEYS for k in ALIASES)


def test_a_job_configured_with_flink_2_keys_only_checkpoints_where_they_say(make_env, tmp_path):
    from sparkpoint.common import WatermarkStrategy
    from sparkpoint.datastream.connectors.number_seq import NumberSequenceSource

    env = make_env(
        "local",
        **{
            "execution.checkpointing.dir": (tmp_path / "ck2").as_uri(),
            "execution.checkpointing.interval": "50 ms",
            "execution.checkpointing.num-retained": 2,
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "execution.epoch.max-records": 50,
        },
    )
    source = NumberSequenceSource(1, 10**9)
    env.from_source(source, WatermarkStrategy.no_watermarks(), "n").uid("n").key_by(lambda n: n % 7).sum(0).uid(
        "sum"
    ).print()
    client = env.execute_async("flink-2-keys")
    deadline = time.time() + 60

    def newest() -> int:
        return max((int(p.parent.name[4:]) for p in (tmp_path / "ck2").glob("*/chk-*/_metadata")), default=0)

    while newest() < 4 and time.time() < deadline:
        time.sleep(0.05)
    client.cancel().result(timeout=60)
    client.wait(60)
    retained = sorted((tmp_path / "ck2").glob("*/chk-*/_metadata"))
    assert newest() >= 4 and 1 <= len(retained) <= 2, retained  # num-retained read from its Flink 2.x spelling


def test_a_flink_2_setting_copied_from_another_configuration_still_replaces_one():
    cli = Configuration({"execution.checkpointing.dir": "file:///from-cli"})
    code = Configuration({"execution.checkpointing.dir": "file:///from-code"})
    merged = Configuration(cli).add_all(code)
    assert merged.get("state.checkpoints.dir") == "file:///from-code"
    assert (
        Configuration(merged).add_all({"state.checkpoints.dir": "file:///old"}).get("execution.checkpointing.dir")
        == "file:///from-code"
    )  # 2.x still wins over 1.x
