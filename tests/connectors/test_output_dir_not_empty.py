"""An output directory holding other jobs' committed files: warned about, or refused on request.

Files of the job's own lineage (the jobs it was restored from) are not other jobs' files.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from sparkpoint.connectors.file_output import OutputNotEmptyError
from tests.connectors.test_sink_rollback import N, cancel_after, completed, numbers, start


def visible_files(out) -> list:
    return [
        p
        for p in out.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(out).parts)
    ]


def test_a_second_job_in_a_used_output_directory_is_warned_of_the_files_there(make_env, tmp_path, caplog):
    out = tmp_path / "out"
    start(make_env, tmp_path, out, rate=None).wait(60)
    (out / "notes.txt").write_text("written by hand\n")
    earlier = len(visible_files(out))
    assert earlier > 1
    with caplog.at_level(logging.WARNING):
        start(make_env, tmp_path, out, rate=None).wait(60)
    warned = [r.getMessage() for r in caplog.records if "committed file(s) of other jobs" in r.getMessage()]
    assert len(warned) == 1, warned
    assert f"output directory {out} already holds {earlier} committed file(s) of other jobs" in warned[0]
    assert numbers_lines(out) == Counter({n: 2 for n in range(N)})  # appended beside them (the default)


def numbers_lines(out) -> Counter:
    return Counter(
        int(line) for p in visible_files(out) if p.name != "notes.txt" for line in p.read_text().splitlines()
    )


def test_fail_if_not_empty_refuses_other_jobs_files_but_not_its_own_lineage(make_env, tmp_path):
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = start(make_env, tmp_path, out)
    cancel_after(first, ck, 3)
    before = sorted(p.name for p in visible_files(out))
    assert before
    refuse = {"sparkpoint.sink.if-output-not-empty": "fail"}
    with pytest.raises(OutputNotEmptyError, match=rf"output directory {out} already holds {len(before)} committed"):
        start(make_env, tmp_path, out, rate=None, **refuse).wait(60)
    assert sorted(p.name for p in visible_files(out)) == before  # nothing written, nothing touched
    # restored from the first job's newest checkpoint: its files are the job's own lineage
    start(make_env, tmp_path, out, restore=completed(ck, first.get_job_id())[-1], rate=None, **refuse).wait(60)
    assert numbers(out) == Counter(range(N))
