"""The Nexmark queries' exact results, computed with pandas from the event files (not from any engine).

:func:`expected` gives a query's lines as a sorted list; :func:`check` compares an engine's lines with them
(q4's running averages: each category's lines count 1, 2, ... n once each, and the line of count n equals the
oracle's; the rest: equal as multisets).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["load", "expected", "check", "output_lines", "WINDOW_MS", "SLIDE_MS"]

WINDOW_MS = 10_000
SLIDE_MS = 2_000
_COLUMNS = {
    "P": ["kind", "ts", "id", "name", "email", "card", "city", "state"],
    "A": ["kind", "ts", "id", "item", "initial_bid", "reserve", "expires", "seller", "category"],
    "B": ["kind", "ts", "auction", "bidder", "price", "channel"],
}


def output_lines(directory: Path) -> list[str]:
    """Every line an engine wrote: of the visible files under ``directory`` (none: no line)."""
    if not directory.exists():
        return []
    files = [
        p
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(directory).parts)
    ]
    return [line for p in files for line in p.read_text().splitlines()]


def load(directory: str | Path) -> dict[str, pd.DataFrame]:
    """``{"P": people, "A": auctions, "B": bids}`` of every event file in ``directory``."""
    frames = [
        pd.read_csv(p, sep="\t", header=None, names=range(9), dtype=str, keep_default_na=False)
        for p in sorted(Path(directory).iterdir())
        if p.is_file() and not p.name.startswith(".")
    ]
    raw = pd.concat(frames, ignore_index=True)
    out = {}
    for kind, cols in _COLUMNS.items():
        part = raw[raw[0] == kind].iloc[:, : len(cols)].copy()
        part.columns = cols
        for c in cols:
            if c in (
                "ts",
                "id",
                "initial_bid",
                "reserve",
                "expires",
                "seller",
                "category",
                "auction",
                "bidder",
                "price",
            ):
                part[c] = part[c].astype(np.int64)
        out[kind] = part.reset_index(drop=True)
    return out


def _lines(df: pd.DataFrame, cols: list[str]) -> list[str]:
    return sorted("\t".join(map(str, row)) for row in df[cols].itertuples(index=False))


def _q0(e: dict) -> list[str]:
    return _lines(e["B"], ["auction", "bidder", "price", "channel", "ts"])


def _q1(e: dict) -> list[str]:
    b = e["B"]
    return sorted(f"{a}\t{d}\t{0.908 * p:.3f}\t{t}" for a, d, p, t in zip(b.auction, b.bidder, b.price, b.ts))


def _q2(e: dict) -> list[str]:
    b = e["B"]
    return _lines(b[b.auction % 123 == 0], ["auction", "price"])


def _q3(e: dict) -> list[str]:
    p = e["P"][e["P"].state.isin(["OR", "ID", "CA"])]
    a = e["A"][e["A"].category == 10]
    joined = a.merge(p, left_on="seller", right_on="id", suffixes=("_a", "_p"))
    return _lines(joined, ["name", "city", "state", "id_a"])


def _winning(e: dict) -> pd.DataFrame:
    a, b = e["A"], e["B"]
    joined = a.merge(b, left_on="id", right_on="auction", suffixes=("_a", "_b"))
    during = joined[(joined.ts_b >= joined.ts_a) & (joined.ts_b <= joined.expires)]
    return during.groupby(["id", "category"], as_index=False).price.max()


def _q4(e: dict) -> list[str]:
    per = _winning(e).groupby("category").price.agg(["sum", "count"])
    return sorted(f"{c}\t{s}\t{n}" for c, (s, n) in per.iterrows())


def _q5(e: dict) -> list[str]:
    b = e["B"]
    first_end = (b.ts // SLIDE_MS + 1) * SLIDE_MS  # the earliest window holding the bid ends here
    parts = [
        pd.DataFrame({"end": first_end + k * SLIDE_MS, "auction": b.auction}) for k in range(WINDOW_MS // SLIDE_MS)
    ]
    counts = pd.concat(parts).groupby(["end", "auction"]).size().rename("n").reset_index()
    top = counts[counts.n == counts.groupby("end").n.transform("max")]
    return _lines(top, ["end", "auction", "n"])


def _q7(e: dict) -> list[str]:
    b = e["B"].assign(end=(e["B"].ts // WINDOW_MS + 1) * WINDOW_MS)
    top = b[b.price == b.groupby("end").price.transform("max")]
    return _lines(top, ["end", "auction", "bidder", "price", "ts"])


def _q8(e: dict) -> list[str]:
    p = e["P"].assign(start=e["P"].ts // WINDOW_MS * WINDOW_MS)
    a = e["A"].assign(start=e["A"].ts // WINDOW_MS * WINDOW_MS)[["seller", "start"]].drop_duplicates()
    joined = p.merge(a, left_on=["id", "start"], right_on=["seller", "start"])
    return _lines(joined, ["id", "name", "start"])


def _q11(e: dict) -> list[str]:
    b = e["B"].sort_values(["bidder", "ts"])
    gap = b.groupby("bidder").ts.diff()
    session = (gap.isna() | (gap > WINDOW_MS)).cumsum()  # windows that touch merge, as Flink's sessions do
    per = b.groupby([b.bidder, session]).ts.agg(["size", "min", "max"]).reset_index()
    return sorted(
        f"{k}\t{n}\t{lo}\t{hi + WINDOW_MS}" for k, n, lo, hi in zip(per.bidder, per["size"], per["min"], per["max"])
    )


_QUERIES = {"q0": _q0, "q1": _q1, "q2": _q2, "q3": _q3, "q4": _q4, "q5": _q5, "q7": _q7, "q8": _q8, "q11": _q11}


def expected(query: str, events: dict[str, pd.DataFrame]) -> list[str]:
    """The query's result lines, sorted."""
    return _QUERIES[query](events)


def check(query: str, got: list[str], want: list[str]) -> str | None:
    """``None`` if an engine's lines ``got`` are the query's result ``want``; else what differs."""
    if query == "q4":
        by_category: dict[str, dict[int, int]] = {}
        for line in got:
            c, total, n = line.split("\t")
            seen = by_category.setdefault(c, {})
            if int(n) in seen:
                return f"q4: category {c} has two lines of count {n}"
            seen[int(n)] = int(total)
        if any(sorted(seen) != list(range(1, len(seen) + 1)) for seen in by_category.values()):
            return "q4: a category's running counts skip a value"
        got = sorted(f"{c}\t{seen[len(seen)]}\t{len(seen)}" for c, seen in by_category.items())
    if sorted(got) == want:
        return None
    g, w = Counter(got), Counter(want)
    missing, extra = list((w - g).elements()), list((g - w).elements())
    return (
        f"{query}: {len(got)} lines, {len(want)} expected; missing {missing[:3]} ({len(missing)} in all), "
        f"extra {extra[:3]} ({len(extra)} in all)"
    )
