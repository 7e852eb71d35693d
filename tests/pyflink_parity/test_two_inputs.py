"""The two-input parity jobs (``two_inputs``, ``broadcast_rules``) against PyFlink 2.3.0's recorded output.

Two inputs interleave in no defined order, in Flink as here, so lines are compared as multisets; lines
printed from keyed operators are compared per key (in order), since which subtask a key lands on
differs (see README.md). Hand computations of the same results are checked too.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from test_parity import TARGETS, recorded, run_job, subtask_and_body, target_configuration


def _per_key(lines: list[str]) -> dict[str, list[str]]:
    """``{key: [lines of that key, in order]}`` for ``N> key ...`` lines; checks one subtask per key."""
    keys: dict[str, list[str]] = defaultdict(list)
    subtask_of: dict[str, int | None] = {}
    for line in lines:
        subtask, body = subtask_and_body(line)
        key = body.split()[0]
        assert subtask_of.setdefault(key, subtask) == subtask, f"key {key} printed by two subtasks"
        keys[key].append(body)
    return dict(keys)


@pytest.mark.parametrize("target", TARGETS)
def test_two_inputs(request, monkeypatch, capsys, tmp_path, target, mode):
    configuration = target_configuration(request, target, tmp_path)
    lines, job = run_job("two_inputs", monkeypatch, capsys, tmp_path, configuration, mode=mode)
    assert Counter(lines) == Counter(recorded("two_inputs"))
    by_hand = (
        [f"n{n}" for n in job["NUMBERS"]]
        + [f"w{w}" for w in job["WORDS"]]
        + [str(n) for n in job["NUMBERS"] for _ in range(n)]
        + [c for w in job["WORDS"] for c in w]
    )
    city = dict(job["USERS"])
    amounts = defaultdict(list)
    for _, user, amount in job["ORDERS"]:
        amounts[user].append(amount)
    by_hand += [f"{u} {city[u]} {len(amounts[u])} {sum(amounts[u])}" for u in city]
    assert Counter(lines) == Counter(by_hand)


@pytest.mark.parametrize("target", TARGETS)
def test_broadcast_rules(request, monkeypatch, capsys, tmp_path, target, mode):
    parallelism = 2  # the job's own set_parallelism
    configuration = target_configuration(request, target, tmp_path)
    lines, job = run_job("broadcast_rules", monkeypatch, capsys, tmp_path, configuration, mode=mode)
    expected = recorded("broadcast_rules")
    rule_lines = [line for line in lines if "rule " in line]
    assert Counter(rule_lines) == Counter(line for line in expected if "rule " in line)
    # every subtask got every rule, with its own prefix: "N> rule <name> at subtask N-1"
    assert Counter(rule_lines) == Counter(
        f"{i + 1}> rule {name} at subtask {i}" for name, _ in job["RULES"] for i in range(parallelism)
    )
    classified = _per_key([line for line in lines if "rule " not in line])
    assert classified == _per_key([line for line in expected if "rule " not in line])
    bounds = sorted(job["RULES"], key=lambda rule: rule[1])
    by_hand = defaultdict(list)
    for sensor, value in job["READINGS"]:
        by_hand[sensor].append(f"{sensor} {value} {[n for n, b in bounds if value >= b][-1]}")
    assert classified == dict(by_hand)
