"""The merging window set of one key (Flink's ``MergingWindowSet``), for merging assigners (sessions).

For each window of the key it maps the window to its *state window*: the window under whose namespace
its contents and trigger state are kept. When windows merge, the merged window takes over the state
window of one of them, so the contents need not move; the state of the others is merged into it by the
caller's merge function. The set itself is a plain ``{window: state window}`` dict, kept by the window
operator in value state between records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MergeFunction", "add_window"]

# merge_function(merge result, windows merged into it, its state window, the merged windows' state windows)
MergeFunction = Callable[[Any, list, Any, list], None]


def add_window(assigner: Any, mapping: dict, new_window: Any, merge_function: MergeFunction) -> Any:
    """Flink's ``MergingWindowSet.addWindow``: add ``new_window`` to ``mapping``, merging it with the windows it
    overlaps (the assigner's ``merge_windows``); returns the window ``new_window`` ends up in.
    ``merge_function`` is called for every merge that involves windows already in the set (the caller merges
    their triggers and contents into the surviving state window); not for ``new_window`` merely joining one."""
    merge_results: list[tuple[Any, list]] = []
    assigner.merge_windows(list(mapping) + [new_window], lambda ws, result: merge_results.append((result, list(ws))))
    result_window = new_window
    merged_new_window = False
    for merge_result, merged_windows in merge_results:
        if new_window in merged_windows:
            merged_windows.remove(new_window)
            merged_new_window = True
            result_window = merge_result
        if not merged_windows:
            continue
        merged_state_window = mapping[merged_windows[0]]
        merged_state_windows = [mapping.pop(w) for w in merged_windows if w in mapping]
        mapping[merge_result] = merged_state_window
        merged_state_windows = [w for w in merged_state_windows if w != merged_state_window]
        if not (merge_result in merged_windows and len(merged_windows) == 1):
            merge_function(merge_result, merged_windows, merged_state_window, merged_state_windows)
    if not merge_results or (result_window == new_window and not merged_new_window):
        mapping[result_window] = result_window
    return result_window
