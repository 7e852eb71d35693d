"""The OpenAPI description is valid, and the endpoint keeps to it under property-based requests.

Hypothesis draws requests for every described operation: ids real or made up, query values,
JSON bodies of any shape. Every answer must be the operation's success status with a body
matching its schema, or one of Flink's error statuses with ``{"errors": [...]}``.
"""

from __future__ import annotations

import re

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate

from sparkpoint.rest.openapi import PATHS, response_schema
from tests.rest.job import registry_entry, rest_client, wait_for

# operations that would end the job the test runs against are drawn with a made-up job id only
_ENDS_THE_JOB = {("/jobs/{jobid}", "patch"), ("/jobs/{jobid}/stop", "post")}
_ERROR_STATUSES = {400, 404, 405, 409, 413}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
body_fields = [
    "checkpointType",
    "target-directory",
    "targetDirectory",
    "cancel-job",
    "drain",
    "triggerId",
    "savepoint-path",
    "formatType",
]


def test_the_description_is_valid_openapi(start_job):
    job = start_job(50)
    with rest_client(job.job_id) as c:
        spec = c.get("/openapi.json").json()
    validate(spec)
    assert set(spec["paths"]) == set(PATHS)


def test_the_endpoint_keeps_to_its_description(start_job):
    job = start_job(300)
    jid = job.job_id
    with rest_client(jid) as c:
        details = wait_for(lambda: c.get(f"/jobs/{jid}").json(), what="job details")
        r = c.post(f"/jobs/{jid}/checkpoints", json={})
        trigger = r.json()["request-id"]
        cid = wait_for(
            lambda: c.get(f"/jobs/{jid}/checkpoints/{trigger}").json().get("operation"), what="a checkpoint"
        )["checkpointId"]
        vertex_ids = [v["id"] for v in details["vertices"]]
        ids = {
            "jobid": st.sampled_from([jid, "0" * 32, "x"]),
            "checkpointid": st.sampled_from([str(cid), "999999", "-1", "abc"]),
            "vertexid": st.sampled_from(vertex_ids + ["f" * 32, "v"]),
            "triggerid": st.sampled_from([trigger, "a" * 32, "t"]),
        }
        operations = [(p, m) for p, methods in PATHS.items() for m in methods]
        body = st.dictionaries(
            st.sampled_from(body_fields),
            json_values | st.sampled_from(["FULL", "INCREMENTAL", "/etc", "file:///tmp/x", True]),
            max_size=3,
        )

        @st.composite
        def requests(draw):
            path, method = draw(st.sampled_from(operations))
            params = {name: draw(ids[name]) for name in re.findall(r"{(\w+)}", path)}
            payload = draw(body) if method != "get" else None
            if (path, method) in _ENDS_THE_JOB or (payload and payload.get("cancel-job") is True):
                params["jobid"] = "0" * 32
            query = draw(
                st.dictionaries(
                    st.sampled_from(["get", "agg", "mode"]),
                    st.text(alphabet="abcdefgmnorstuxIRNOS.,0", max_size=30),
                    max_size=2,
                )
            )
            return path, method, path.format(**params), query, payload

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(requests())
        def check(request):
            path, method, url, query, payload = request
            r = c.request(method.upper(), url, params=query, json=payload)
            ok = PATHS[path][method][0]
            assert r.status_code == ok or r.status_code in _ERROR_STATUSES, (method, url, query, payload, r.text)
            jsonschema.validate(r.json(), response_schema(path, method, r.status_code))

        check()
        assert registry_entry(jid)
        assert c.get(f"/jobs/{jid}").json()["state"] == "RUNNING"
