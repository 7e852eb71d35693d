"""The endpoint's protections, against a real server: token, TLS, owner-only registry, state roots, sizes."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import stat
from pathlib import Path

import httpx
import pytest

from sparkpoint.rest.registry import JobRegistry
from tests.rest.job import await_operation, registry_entry, rest_client


def _self_signed(tmp_path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made here (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "rest.crt", tmp_path / "rest.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_path), str(key_path)


def test_token_over_tls_with_a_self_signed_certificate(start_job, tmp_path):
    cert, key = _self_signed(tmp_path)
    token = "a-token-of-this-test-0123456789"
    job = start_job(
        200,
        **{
            "rest.token": token,
            "security.ssl.rest.enabled": "true",
            "security.ssl.rest.certificate": cert,
            "security.ssl.rest.private-key": key,
        },
    )
    entry = registry_entry(job.job_id)
    assert entry["scheme"] == "https" and entry["token"] == token
    url = f"https://127.0.0.1:{entry['port']}/jobs/{job.job_id}"
    with httpx.Client(verify=ssl.create_default_context(cafile=cert), timeout=10) as c:
        missing = c.get(url)
        assert missing.status_code == 401 and set(missing.json()) == {"errors"}
        assert c.get(url, headers={"Authorization": f"Bearer {token}x"}).status_code == 401
        assert c.get(url, headers={"Authorization": token}).status_code == 401  # not a bearer token
        ok = c.get(url, headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["jid"] == job.job_id
    with pytest.raises(httpx.ConnectError):  # TLS only: the certificate is not trusted by default
        httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    with pytest.raises(httpx.RemoteProtocolError):  # and no plain HTTP
        httpx.get(url.replace("https", "http"), timeout=10)


def test_another_bind_address_requires_a_token_kept_owner_only(start_job):
    job = start_job(100, **{"rest.bind-address": "127.0.0.2"})
    entry = registry_entry(job.job_id)
    assert entry["address"] == "127.0.0.2" and len(entry["token"]) == 64  # generated
    registry = JobRegistry().dir
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700
    assert stat.S_IMODE((registry / f"{job.job_id}.json").stat().st_mode) == 0o600
    url = f"http://127.0.0.2:{entry['port']}/jobs/{job.job_id}"
    assert httpx.get(url, timeout=10).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {entry['token']}"}, timeout=10).status_code == 200


def test_loopback_needs_no_token(start_job):
    job = start_job(100)
    entry = registry_entry(job.job_id)
    assert "token" not in entry and entry["address"] == "127.0.0.1"
    assert httpx.get(f"http://127.0.0.1:{entry['port']}/jobs", timeout=10).status_code == 200


def test_targets_outside_the_configured_roots_are_refused(start_job, tmp_path):
    allowed = tmp_path / "allowed"
    job = start_job(100, **{"sparkpoint.rest.allowed-dirs": allowed.as_uri()})
    jid = job.job_id
    with rest_client(jid) as c:
        for target in (
            (tmp_path / "elsewhere").as_uri(),
            str(tmp_path / "savepoints" / ".." / "escape"),
            "s3://some-bucket/savepoints",
            "/etc",
        ):
            r = c.post(f"/jobs/{jid}/savepoints", json={"target-directory": target})
            assert r.status_code == 400, (target, r.text)
            [error] = r.json()["errors"]
            assert "outside the allowed directories" in error and repr(target) in error
        stop = c.post(f"/jobs/{jid}/stop", json={"targetDirectory": "/tmp/anywhere"})
        assert stop.status_code == 400
        disposal = c.post("/savepoint-disposal", json={"savepoint-path": "/etc/passwd"})
        assert disposal.status_code == 400 and "outside the allowed directories" in disposal.json()["errors"][0]
        # under a root: accepted (state.savepoints.dir, and the allow-list key)
        for target in ((tmp_path / "savepoints" / "a").as_uri(), str(allowed / "b")):
            assert c.post(f"/jobs/{jid}/savepoints", json={"target-directory": target}).status_code == 202
        assert job.client.get_job_status().result().name == "RUNNING"  # the refused stop stopped nothing


def test_the_job_owner_may_put_a_savepoint_anywhere(start_job, tmp_path):
    """A request with the owner's token (an owner-only registry entry, which the owner's CLI sends) may name any
    target, as Flink's does; without it the refusal names the keys that allow more. The owner may dispose of it
    there too; a path under no root stays refused for everyone else."""
    job = start_job(100)
    jid = job.job_id
    entry = registry_entry(jid)
    assert entry["owner_token"] and stat.S_IMODE((JobRegistry().dir / f"{jid}.json").stat().st_mode) == 0o600
    elsewhere = tmp_path / "elsewhere" / "by-owner"
    with rest_client(jid) as stranger, rest_client(jid, token=entry["owner_token"]) as owner:
        refused = stranger.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(elsewhere)})
        assert refused.status_code == 400
        assert "state.savepoints.dir or sparkpoint.rest.allowed-dirs" in refused.json()["errors"][0]
        r = owner.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(elsewhere)})
        assert r.status_code == 202, r.text
        done = await_operation(owner, f"/jobs/{jid}/savepoints/{r.json()['request-id']}")
        location = done["operation"]["location"]
        assert location.startswith(elsewhere.as_uri()) and (Path(location[len("file://") :]) / "_metadata").exists()
        assert stranger.post("/savepoint-disposal", json={"savepoint-path": location}).status_code == 400
        disposal = owner.post("/savepoint-disposal", json={"savepoint-path": location})
        assert disposal.status_code == 202, disposal.text
        await_operation(owner, f"/savepoint-disposal/{disposal.json()['request-id']}")
        assert not Path(location[len("file://") :]).exists()
    assert job.client.get_job_status().result().name == "RUNNING"


def test_request_bodies_are_bounded_and_errors_are_flinks(start_job):
    job = start_job(100, **{"rest.server.max-content-length": 1024})
    jid = job.job_id
    with rest_client(jid) as c:
        big = c.post(
            f"/jobs/{jid}/checkpoints",
            content=b'{"checkpointType": "FULL", "x": "' + b"a" * 2000 + b'"}',
            headers={"Content-Type": "application/json"},
        )
        assert big.status_code == 413 and "rest.server.max-content-length" in big.json()["errors"][0]

        def chunks():
            for _ in range(40):
                yield b" " * 100

        chunked = c.post(f"/jobs/{jid}/checkpoints", content=chunks())  # no Content-Length
        assert chunked.status_code == 413
        bad_json = c.post(f"/jobs/{jid}/checkpoints", content=b"{nope")
        assert bad_json.status_code == 400 and bad_json.json()["errors"][0].startswith("request body is not JSON")
        assert c.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "SOME"}).status_code == 400
        for path, status in (
            ("/nope", 404),
            (f"/jobs/{'0' * 32}", 404),
            ("/jobs/not-a-job-id", 400),
            (f"/jobs/{jid}/checkpoints/details/abc", 400),
            (f"/jobs/{jid}/vertices/xyz/metrics", 400),
            (f"/jobs/{jid}/savepoints/{'f' * 32}", 404),
        ):
            r = c.get(path)
            assert r.status_code == status and set(r.json()) == {"errors"}, (path, r.text)
        wrong_method = c.delete(f"/jobs/{jid}")
        assert wrong_method.status_code == 405 and set(wrong_method.json()) == {"errors"}
        assert c.patch(f"/jobs/{jid}", params={"mode": "stop"}).status_code == 400
        assert job.client.get_job_status().result().name == "RUNNING"


def test_a_symbolic_link_out_of_a_root_is_refused(start_job, tmp_path):
    (tmp_path / "savepoints").mkdir()
    (tmp_path / "savepoints" / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    job = start_job(50)
    with rest_client(job.job_id) as c:
        r = c.post(f"/jobs/{job.job_id}/savepoints", json={"target-directory": str(tmp_path / "savepoints" / "link")})
        assert r.status_code == 400 and "outside the allowed directories" in r.json()["errors"][0]
