"""W1, W2 and W3 as measurements of :mod:`bench.compare`: input and oracle once, then one checked run.

Per workload, :func:`prepare` writes the input and its oracle once, in the parent, with this
checkout's code (so the oracle does not depend on the tree under test), and returns what the
children need (paths and sizes, JSON). :func:`measure` runs in a child that imports the tree
under test: an untimed warm-up of the same job on a small input, then one timed run whose output
is checked against the oracle as ``bench/w1.py``, ``bench/w2.py`` and ``bench/w3.py`` check it.
A run whose output is wrong has ``ok: false``.

Each measurement returns ``rate`` (higher is faster: events/s for W1 and W3; for W2 the records
of a hot epoch over the median hot-epoch time, what W2 is about), ``seconds`` (the timed run's
wall time), ``ok`` and ``detail`` (figures printed but not compared).

This module imports ``sparkpoint`` (through the workloads' modules) only inside functions: a
child must first put the tree under test on its path (:func:`bench.compare_tree.enter_tree`).
"""

from __future__ import annotations

import json
import pickle
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

WORKLOADS = ("w1", "w2", "w3")
W1_WARMUP_EVENTS = 100_000
W3_WARMUP_EVENTS = 100_000
W2_WARMUP_KEYS = 20_000


# -- in the parent ------------------------------------------------------------------------------


def prepare(workload: str, data: Path, sizes: dict[str, Any]) -> dict[str, Any]:
    """Write ``workload``'s input, warm-up input and oracle under ``data``; what the children need."""
    from sparkpoint.connectors.events import EventSpec

    warm_spec = EventSpec(seed=EventSpec().seed + 1)
    data.mkdir(parents=True, exist_ok=True)
    if workload == "w1":
        from bench.w1_data import oracle_counts, write_event_files

        write_event_files(data / "w1-input", sizes["w1_events"], sizes["w1_files"])
        write_event_files(data / "w1-warmup", W1_WARMUP_EVENTS, 2, warm_spec)
        oracle_counts(sizes["w1_events"]).to_pickle(data / "w1-oracle.pkl")
        return {
            "input": str(data / "w1-input"),
            "warmup": str(data / "w1-warmup"),
            "oracle": str(data / "w1-oracle.pkl"),
            "events": sizes["w1_events"],
        }
    if workload == "w2":
        from bench.w2_data import write_input

        shape = (sizes["w2_load_records"], sizes["w2_hot_epochs"], sizes["w2_hot_records"], sizes["w2_touch_fraction"])
        inp = write_input(data / "w2-input", sizes["w2_keys"], *shape)
        warm_keys = min(W2_WARMUP_KEYS, sizes["w2_keys"])
        warm = write_input(
            data / "w2-warmup",
            warm_keys,
            sizes["w2_load_records"],
            2,
            min(20_000, warm_keys),
            sizes["w2_touch_fraction"],
            seed=99,
        )
        for name, value in (("w2-input.pkl", inp), ("w2-warmup.pkl", warm)):
            (data / name).write_bytes(pickle.dumps(value))
        return {
            "input": str(data / "w2-input.pkl"),
            "warmup": str(data / "w2-warmup.pkl"),
            "keys": sizes["w2_keys"],
            "restore": sizes["w2_restore"],
        }
    if workload == "w3":
        from bench.w1_data import write_event_files
        from bench.w3 import oracle

        write_event_files(data / "w3-input", sizes["w3_events"], sizes["w3_files"])
        write_event_files(data / "w3-warmup", W3_WARMUP_EVENTS, 2, warm_spec)
        expected = sorted(oracle(sizes["w3_events"]))
        (data / "w3-oracle.json").write_text(json.dumps(expected))
        return {
            "input": str(data / "w3-input"),
            "warmup": str(data / "w3-warmup"),
            "oracle": str(data / "w3-oracle.json"),
            "events": sizes["w3_events"],
            "expected_keys": len(expected),
        }
    raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}")


# -- in a child ---------------------------------------------------------------------------------


def measure(spark: Any, workload: str, engine: str, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    """One warm-up and one timed, checked run of ``workload`` on ``engine`` (``spark`` or ``sparkpoint``,
    ``variant`` naming its configuration) in ``work``."""
    runs = {
        ("w1", "spark"): _w1_spark,
        ("w1", "sparkpoint"): _w1_sparkpoint,
        ("w2", "spark"): _w2_spark,
        ("w2", "sparkpoint"): _w2_sparkpoint,
        ("w3", "spark"): _w3_spark,
        ("w3", "sparkpoint"): _w3_sparkpoint,
    }
    return runs[(workload, engine)](spark, variant, data, work)


def _w1_spark(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    import pandas as pd

    from bench.w1_spark import read_output, run_spark_streaming, verify_output

    run_spark_streaming(data["warmup"], work / "warm-out", spark)
    res = run_spark_streaming(data["input"], work / "out", spark)
    # append mode holds back the windows the final watermark has not passed: checked as w1.py checks them
    check = verify_output(read_output(work / "out", spark), pd.read_pickle(data["oracle"]), res["final_watermark_ms"])
    ok = bool(check["ok"]) and res["events"] == data["events"]
    return {
        "rate": data["events"] / res["seconds"],
        "seconds": res["seconds"],
        "ok": ok,
        "detail": {"rows": check["emitted_rows"], "held_back_rows": check["held_back_rows"], "batches": res["batches"]},
    }


def _w1_sparkpoint(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    import pandas as pd

    from bench.w1 import check_output_dir, run_sparkpoint

    max_records = int(variant.removeprefix("max-records-"))
    run_sparkpoint(Path(data["warmup"]), work / "warm-out", work / "warm-state", spark=spark, max_records=max_records)
    res = run_sparkpoint(Path(data["input"]), work / "out", work / "state", spark=spark, max_records=max_records)
    check = check_output_dir(work / "out", pd.read_pickle(data["oracle"]))  # exact: every window, no left-overs
    ok = bool(check["ok"]) and res["events"] == data["events"]
    return {
        "rate": data["events"] / res["seconds"],
        "seconds": res["seconds"],
        "ok": ok,
        "detail": {"rows": check["emitted_rows"], "epochs": res["epochs"]},
    }


def _w2_input(path: str, work: Path, name: str) -> Any:
    """The pickled W2 input, its files copied into ``work`` (a restore run adds and removes files there)."""
    inp = pickle.loads(Path(path).read_bytes())
    copy = work / name
    shutil.copytree(inp.directory, copy)  # copy2: modification times (the files' order) kept
    inp.directory = copy
    inp.pair_paths = [[copy / p.name for p in pair] for pair in inp.pair_paths]
    return inp


def _hot_records(inp: Any) -> int:
    a, b = inp.hot_pairs[0]
    return len(a) + len(b)


def _w2_spark(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    from bench.w2 import run_spark_peer

    run_spark_peer(spark, _w2_input(data["warmup"], work, "warm-input"), work)
    inp = _w2_input(data["input"], work, "input")
    out = run_spark_peer(spark, inp, work)
    hot_s = out["hot_batch_median_ms"] / 1000
    return {
        "rate": _hot_records(inp) / hot_s,
        "seconds": out["seconds"],
        "ok": bool(out["ok"]),
        "detail": {
            "hot_s": [ms / 1000 for ms in out["hot_batch_ms"]],
            "hot_median_s": hot_s,
            "load_s": sum(out["load_batch_ms"]) / 1000,
        },
    }


def _w2_sparkpoint(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    from bench.w2 import run_size

    backend, _, kind = variant.partition("-")
    incremental = kind == "incremental"
    (work / "warm").mkdir()
    run_size(
        spark, _w2_input(data["warmup"], work, "warm-input"), work / "warm", backend, incremental, with_restore=False
    )
    inp = _w2_input(data["input"], work, "input")
    out = run_size(spark, inp, work, backend, incremental, with_restore=bool(data["restore"]))
    main = out["main"]
    ok = bool(main["check"]["ok"] and main["epoch_shape_ok"])
    detail = {
        "hot_s": main["hot_epoch_s"],
        "hot_median_s": main["hot_epoch_median_s"],
        "load_s": main["load_s"],
        "checkpoint_ms": main["hot_checkpoints"]["end_to_end_ms_median"],
    }
    if data["restore"]:
        restore = out.get("restore", {})
        ok = ok and bool(restore.get("check", {}).get("ok"))
        detail["restore_first_epoch_s"] = restore.get("first_epoch_s")
    return {
        "rate": _hot_records(inp) / main["hot_epoch_median_s"],
        "seconds": main["seconds"],
        "ok": ok,
        "detail": detail,
    }


def _w3_spark(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    from bench.w3_spark import run_native

    run_native(spark, Path(data["warmup"]), work / "warm-ck")
    res = run_native(spark, Path(data["input"]), work / "ck")
    expected = set(json.loads(Path(data["oracle"]).read_text()))
    return {
        "rate": data["events"] / res["seconds"],
        "seconds": res["seconds"],
        "ok": res["keys"] == expected,
        "detail": {"keys": len(res["keys"]), "expected_keys": len(expected), "batches": res["batches"]},
    }


def _w3_sparkpoint(spark: Any, variant: str, data: dict[str, Any], work: Path) -> dict[str, Any]:
    from bench.w3 import MAX_RECORDS, run_sparkpoint

    (work / "warm").mkdir()
    run_sparkpoint(spark, Path(data["warmup"]), work / "warm", variant, MAX_RECORDS)
    res = run_sparkpoint(spark, Path(data["input"]), work, variant, MAX_RECORDS)
    expected = json.loads(Path(data["oracle"]).read_text())
    ok = Counter(res["lines"]) == Counter(expected)  # every key that reaches 5 events, each once
    return {
        "rate": data["events"] / res["seconds"],
        "seconds": res["seconds"],
        "ok": ok,
        "detail": {"keys": len(res["lines"]), "expected_keys": len(expected), "epochs": res["epochs"]},
    }
