"""Summaries and printing for benchmark W2 (:mod:`bench.w2`)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.w2_data import W2Input

MB = 1e6


def _median(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def summarize_epochs(run: dict[str, Any], inp: W2Input) -> dict[str, Any]:
    """Load/hot/idle epochs of a main run, and its checkpoints taken in the hot phase."""
    data = [e for e in run["epochs"] if e["records_in"] > 0]
    n_load = len(inp.load_pairs)
    load, hot = data[:n_load], data[n_load : n_load + len(inp.hot_pairs)]
    sizes = [len(a) + len(b) for a, b in inp.load_pairs + inp.hot_pairs]
    shape_ok = [e["records_in"] for e in data] == sizes
    idle = [e for e in run["epochs"] if e["records_in"] == 0]
    first_hot = hot[0]["epoch"] if hot else float("inf")
    steady = sorted(
        (c for c in run["checkpoints"] if c["barrier_epoch"] >= first_hot), key=lambda c: c["barrier_epoch"]
    )
    return {
        "epoch_shape_ok": shape_ok,
        "load_epoch_s": [round(e["duration_s"], 3) for e in load],
        "hot_epoch_s": [round(e["duration_s"], 3) for e in hot],
        "hot_epoch_median_s": _median([e["duration_s"] for e in hot]),
        "hot_phase_ms_median": {
            phase: _median([e.get("phase_ms", {}).get(phase, 0.0) for e in hot])
            for phase in sorted({p for e in hot for p in e.get("phase_ms", {})})
        },
        "idle_epochs": len(idle),
        "idle_epoch_median_s": _median([e["duration_s"] for e in idle]),
        "load_s": sum(e["duration_s"] for e in load),
        "checkpoints_completed": len(run["checkpoints"]),
        "hot_checkpoints": {
            "count": len(steady),
            "changelog_count": sum(c.get("kind") == "changelog" for c in steady),
            "end_to_end_ms_median": _median([c["end_to_end_ms"] for c in steady]),
            "sync_ms_median": _median([c["sync_ms"] for c in steady]),
            "async_ms_median": _median([c["async_ms"] for c in steady]),
            "async_ms_max": max((c["async_ms"] or 0 for c in steady), default=float("nan")),
            "state_size_median": _median([c["state_size"] for c in steady]),
            "bytes_median": _median([c["chk_dir_bytes"] + c["new_shared_bytes"] for c in steady]),
            "bytes_max": max((c["chk_dir_bytes"] + c["new_shared_bytes"] for c in steady), default=0),
            **_bytes_against_change(steady, [e["epoch"] for e in hot], inp),
        },
    }


def _bytes_against_change(steady: list[dict[str, Any]], hot_epochs: list[int], inp: W2Input) -> dict[str, float]:
    """Bytes the hot phase's checkpoints wrote against the bytes of the entries its epochs changed: every
    checkpoint after the first hot one holds the epochs since the one before it (its barrier's included),
    so both sums cover the same epochs, those after the first hot checkpoint's barrier up to the last one's."""
    if len(steady) < 2:
        return {"written_bytes": float("nan"), "changed_bytes": float("nan"), "written_per_changed": float("nan")}
    changed_of = dict(zip(hot_epochs, inp.changed_entry_bytes()))
    written = sum(c["chk_dir_bytes"] + c["new_shared_bytes"] for c in steady[1:])
    changed = sum(changed_of.get(e, 0) for e in range(steady[0]["barrier_epoch"] + 1, steady[-1]["barrier_epoch"] + 1))
    return {
        "written_bytes": written,
        "changed_bytes": changed,
        "written_per_changed": written / changed if changed else float("nan"),
    }


def _mb(n: float) -> str:
    if n != n:  # nan
        return "-"
    return f"{n / MB:,.1f} MB" if abs(n) >= MB else f"{n / 1e3:,.1f} kB"


def print_backend(label: str, big: dict[str, Any], small: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Print one backend/checkpoint kind at N keys vs the small reference, run before and ``after`` the big
    one; returns the ratios (against the mean of the two small runs' medians)."""
    bm, sm, am = big["main"], small["main"], after["main"]
    reference = (sm["hot_epoch_median_s"] + am["hot_epoch_median_s"]) / 2
    ratio = bm["hot_epoch_median_s"] / reference
    print(f"\n{label}:")
    print(f"  {'':<34} {big['keys']:>14,} keys {small['keys']:>14,} keys")
    rows = [
        ("hot epoch, median", f"{bm['hot_epoch_median_s']:.2f} s", f"{sm['hot_epoch_median_s']:.2f} s"),
        (
            "load epochs (total)",
            f"{len(bm['load_epoch_s'])} ({bm['load_s']:.1f} s)",
            f"{len(sm['load_epoch_s'])} ({sm['load_s']:.1f} s)",
        ),
        ("idle epoch (no input), median", f"{bm['idle_epoch_median_s']:.2f} s", f"{sm['idle_epoch_median_s']:.2f} s"),
    ]
    hb, hs = bm["hot_checkpoints"], sm["hot_checkpoints"]
    rows += [
        (
            "checkpoints (hot phase / all)",
            f"{hb['count']} / {bm['checkpoints_completed']}",
            f"{hs['count']} / {sm['checkpoints_completed']}",
        ),
        (
            "hot checkpoints from the changelog",
            f"{hb['changelog_count']} of {hb['count']}",
            f"{hs['changelog_count']} of {hs['count']}",
        ),
        (
            "checkpoint end-to-end, median",
            f"{hb['end_to_end_ms_median']:,.0f} ms",
            f"{hs['end_to_end_ms_median']:,.0f} ms",
        ),
        ("checkpoint sync, median", f"{hb['sync_ms_median']:,.1f} ms", f"{hs['sync_ms_median']:,.1f} ms"),
        (
            "checkpoint async, median [max]",
            f"{hb['async_ms_median']:,.0f} [{hb['async_ms_max']:,.0f}] ms",
            f"{hs['async_ms_median']:,.0f} [{hs['async_ms_max']:,.0f}] ms",
        ),
        ("checkpoint state_size, median", _mb(hb["state_size_median"]), _mb(hs["state_size_median"])),
        ("checkpoint bytes written, median", _mb(hb["bytes_median"]), _mb(hs["bytes_median"])),
        ("written / changed bytes, hot phase", _per_changed(hb), _per_changed(hs)),
    ]
    br, sr = big.get("restore", {}), small.get("restore", {})
    rows.append(
        (
            "restore: start -> first epoch done",
            f"{br.get('first_epoch_s') or float('nan'):.2f} s",
            f"{sr.get('first_epoch_s') or float('nan'):.2f} s",
        )
    )
    rows += [
        ("peak RSS, largest Python worker", _mb(bm["rss"]["worker_peak_bytes"]), _mb(sm["rss"]["worker_peak_bytes"])),
        (
            "peak RSS, all Python workers",
            _mb(bm["rss"]["workers_sum_peak_bytes"]),
            _mb(sm["rss"]["workers_sum_peak_bytes"]),
        ),
        (
            "peak RSS, Python worker (restore)",
            _mb(br.get("rss", {}).get("worker_peak_bytes", 0)),
            _mb(sr.get("rss", {}).get("worker_peak_bytes", 0)),
        ),
        (
            "peak RSS, driver / JVM",
            f"{_mb(bm['rss']['driver_peak_bytes'])} / {_mb(bm['rss']['jvm_peak_bytes'])}",
            f"{_mb(sm['rss']['driver_peak_bytes'])} / {_mb(sm['rss']['jvm_peak_bytes'])}",
        ),
        ("checks (sample counts, epochs)", _checks(big), _checks(small)),
    ]
    for name, a, b in rows:
        print(f"  {name:<34} {a:>19} {b:>19}")
    print(f"  hot epochs at {big['keys']:,} keys (s): {' '.join(f'{x:.1f}' for x in bm['hot_epoch_s'])}")
    print(f"  hot epochs at {small['keys']:,} keys (s): {' '.join(f'{x:.1f}' for x in sm['hot_epoch_s'])}")
    print(
        f"  hot epochs at {small['keys']:,} keys, run again after (s): "
        f"{' '.join(f'{x:.1f}' for x in am['hot_epoch_s'])}; median {am['hot_epoch_median_s']:.2f} s, "
        f"checks {'OK' if am['check']['ok'] and am['epoch_shape_ok'] else 'WRONG'}"
    )
    for keys, run in ((big["keys"], bm), (small["keys"], sm), (after["keys"], am)):
        phases = run.get("hot_phase_ms_median", {})
        print(
            f"  task time per hot epoch at {keys:,} keys, all tasks, median ms: "
            + " ".join(f"{phase} {ms:,.0f}" for phase, ms in phases.items())
        )
    print(
        f"  hot-epoch ratio {big['keys']:,} / {small['keys']:,} keys: {ratio:.2f}x against the mean of the "
        f"small runs before and after ({bm['hot_epoch_median_s'] / sm['hot_epoch_median_s']:.2f}x / "
        f"{bm['hot_epoch_median_s'] / am['hot_epoch_median_s']:.2f}x against each; target <= 1.5x); "
        f"restore at {big['keys']:,} keys: {br.get('first_epoch_s') or float('nan'):.1f} s (target <= 20 s); "
        f"checkpoint bytes written / entry bytes changed in the hot phase at {big['keys']:,} keys: "
        f"{hb['written_per_changed']:.2f}x (target <= 2x)",
        flush=True,
    )
    return {
        "hot_epoch_ratio": ratio,
        "hot_epoch_reference_s": reference,
        "restore_s": br.get("first_epoch_s"),
        "written_per_changed": hb["written_per_changed"],
    }


def _per_changed(checkpoints: dict[str, Any]) -> str:
    """``written / changed = ratio`` of :func:`_bytes_against_change` (target: at most 2x)."""
    return (
        f"{_mb(checkpoints['written_bytes'])} / {_mb(checkpoints['changed_bytes'])} = "
        f"{checkpoints['written_per_changed']:.2f}x"
    )


def _checks(run: dict[str, Any]) -> str:
    ok_main = run["main"]["check"]["ok"] and run["main"]["epoch_shape_ok"]
    ok_restore = run.get("restore", {}).get("check", {}).get("ok", False)
    return f"main {'OK' if ok_main else 'WRONG'}, restore {'OK' if ok_restore else 'WRONG'}"


def summarize_spark(res: dict[str, Any], inp: W2Input) -> dict[str, Any]:
    data = [b for b in res["batches"] if b["rows"] > 0]
    n_load = len(inp.load_pairs)
    hot = data[n_load:]
    expected = inp.sample_totals(False)
    ok = res["sample"] == expected and sum(b["rows"] for b in data) == inp.main_records
    copied = [b["rocksdb_bytes_copied"] for b in hot]
    growth = [
        b2["state_dir_bytes"] - b1["state_dir_bytes"]
        for b1, b2 in zip(hot, hot[1:])
        if b1["state_dir_bytes"] is not None and b2["state_dir_bytes"] is not None
    ]
    return {
        "keys": inp.keys,
        "ok": ok,
        "seconds": res["seconds"],
        "batches": len(res["batches"]),
        "load_batch_ms": [b["ms"] for b in data[:n_load]],
        "hot_batch_ms": [b["ms"] for b in hot],
        "hot_batch_median_ms": _median([b["ms"] for b in hot]),
        "hot_bytes_copied_median": _median(copied) if all(c is not None for c in copied) else None,
        "hot_state_dir_growth_median": _median(growth) if growth else None,
        "state_dir_bytes_end": res["state_dir_bytes_end"],
        "state_rows_end": data[-1]["state_rows"] if data else None,
        "rss": res.get("rss"),
        "batch_detail": res["batches"],
        "changelog": res["changelog_checkpointing"],
    }


def print_spark(big: dict[str, Any], small: dict[str, Any]) -> float:
    ratio = big["hot_batch_median_ms"] / small["hot_batch_median_ms"]
    print(
        "\nspark structured streaming, groupBy(key).count(), RocksDB state store "
        f"(changelog checkpointing: {big['changelog']}):"
    )
    print(f"  {'':<34} {big['keys']:>14,} keys {small['keys']:>14,} keys")
    rows = [
        ("hot micro-batch, median", f"{big['hot_batch_median_ms']:,.0f} ms", f"{small['hot_batch_median_ms']:,.0f} ms"),
        (
            "load micro-batches (total)",
            f"{len(big['load_batch_ms'])} ({sum(big['load_batch_ms']) / 1000:.1f} s)",
            f"{len(small['load_batch_ms'])} ({sum(small['load_batch_ms']) / 1000:.1f} s)",
        ),
        ("state rows at the end", f"{big['state_rows_end']:,}", f"{small['state_rows_end']:,}"),
        (
            "rocksdb bytes copied / hot batch",
            _mb(big["hot_bytes_copied_median"] or 0),
            _mb(small["hot_bytes_copied_median"] or 0),
        ),
        (
            "state dir growth / hot batch",
            _mb(big["hot_state_dir_growth_median"] or 0),
            _mb(small["hot_state_dir_growth_median"] or 0),
        ),
        ("state dir at the end", _mb(big["state_dir_bytes_end"]), _mb(small["state_dir_bytes_end"])),
        (
            "peak RSS, Python workers (sum, idle)",
            _mb(big["rss"]["workers_sum_peak_bytes"]),
            _mb(small["rss"]["workers_sum_peak_bytes"]),
        ),
        ("peak RSS, JVM", _mb(big["rss"]["jvm_peak_bytes"]), _mb(small["rss"]["jvm_peak_bytes"])),
        ("sample counts", "OK" if big["ok"] else "WRONG", "OK" if small["ok"] else "WRONG"),
    ]
    for name, a, b in rows:
        print(f"  {name:<34} {a:>19} {b:>19}")
    print(f"  hot micro-batches at {big['keys']:,} keys (ms): {' '.join(map(str, big['hot_batch_ms']))}")
    print(f"  hot micro-batches at {small['keys']:,} keys (ms): {' '.join(map(str, small['hot_batch_ms']))}")
    print(f"  hot micro-batch ratio {big['keys']:,} / {small['keys']:,} keys: {ratio:.2f}x", flush=True)
    return ratio
