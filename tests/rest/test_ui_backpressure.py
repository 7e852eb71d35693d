"""The web UI's back-pressure indication, in headless Chromium, on a continuous-mode job with a bottleneck
(tests/rest/slow_job.py): the source's operator row and graph node say ``high``, as the REST API does, and the slow
function is shown busy."""

from __future__ import annotations

import pytest

from tests.rest.job import rest_client, wait_for
from tests.rest.slow_job import build_slow_job, continuous_conf
from tests.rest.test_ui_browser import _base, chromium, dump  # noqa: F401 - chromium is a fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_overview_shows_the_backpressured_and_the_busy_operator(make_env, tmp_path, monkeypatch, chromium):  # noqa: F811
    monkeypatch.setenv("SPARKPOINT_HOME", str(tmp_path / "home"))
    env = make_env("local", **continuous_conf(tmp_path, **{"execution.checkpointing.interval": "1h"}))
    build_slow_job(env, tmp_path / "out")
    client = env.execute_async("slow")
    jid = client.get_job_id()
    try:
        with rest_client(jid) as c:
            vertices = {v["name"]: v["id"] for v in c.get(f"/jobs/{jid}").json()["vertices"]}
            source, slow = vertices["numbers"], vertices["KeyedProcess"]

            def level(vid: str) -> str:
                return c.get(f"/jobs/{jid}/vertices/{vid}/backpressure").json()["backpressureLevel"]

            wait_for(lambda: level(source) == "high", 60, "the source backpressured")
            page = dump(chromium, _base(jid) + f"#/jobs/{jid}")
            assert (level(source), level(slow)) == ("high", "ok")
    finally:
        client.cancel()
        client.wait(60)
    assert page.value("op-backpressure", vertex=source).startswith("high (")
    assert page.value("op-backpressure", vertex=slow).startswith("ok (")
    assert int(page.value("op-busy", vertex=slow).removesuffix(" %")) > 50
    nodes = {a["data-vertex"]: a["class"] for _, a in page.elements if "data-vertex" in a and "class" in a}
    assert nodes[source] == "node bp-high" and nodes[slow] == "node bp-ok"
    ratio = page.value("op-backpressure", vertex=source).split("(")[1].rstrip(")")
    assert page.value("graph-busy", vertex=source).endswith(f"backpressured {ratio}")
