"""Request bodies that the JSON parser cannot take whole: answered 400 with Flink's ``{"errors": [...]}``."""

from __future__ import annotations

from tests.rest.job import rest_client


def test_deeply_nested_json_is_a_400_on_every_endpoint_that_takes_a_body(start_job):
    job = start_job(100)
    jid = job.job_id
    deep = b"[" * 100_000  # 100 kB: under rest.server.max-content-length, far beyond the parser's stack
    with rest_client(jid) as c:
        for method, path in (
            ("POST", f"/jobs/{jid}/checkpoints"),
            ("POST", f"/jobs/{jid}/savepoints"),
            ("POST", f"/jobs/{jid}/stop"),
            ("POST", "/savepoint-disposal"),
            ("PATCH", f"/jobs/{jid}"),
        ):
            for body in (deep, b'{"a": ' * 40 + b"1" + b"}" * 40):  # and nested 40 deep, parseable
                r = c.request(method, path, content=body, headers={"Content-Type": "application/json"})
                assert r.status_code == 400, (method, path, r.status_code, r.text[:200])
                assert set(r.json()) == {"errors"}, r.text
                [error] = r.json()["errors"]
                assert error == "request body nests JSON arrays or objects deeper than 32 levels", error
        assert job.client.get_job_status().result().name == "RUNNING"  # nothing was stopped or cancelled
