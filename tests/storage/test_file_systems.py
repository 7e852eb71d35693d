"""Checkpoint storage on a local file system and on an S3 bucket: one suite, both stores.

The S3 cases talk HTTP to moto's server (``s3_server``); what a client really sent is read
from the server's request recording.
"""

from __future__ import annotations

import hashlib
import posixpath

import fsspec
import pytest

from sparkpoint.checkpoint.metadata import HIDDEN_VALUE, CheckpointMetadata, MetadataV1Serializer
from sparkpoint.storage.checkpoint_storage import (
    FsCheckpointStorage,
    StreamStateHandle,
    latest_completed,
    read_verified,
    write_file,
)
from sparkpoint.storage.exceptions import CheckpointStorageError, CorruptCheckpointError
from sparkpoint.storage.file_systems import (
    configure_file_systems,
    is_object_store,
    open_file_system,
    storage_options_for,
    storage_options_from_config,
)


# -- configuration ------------------------------------------------------------------------------
def test_s3_keys_map_to_s3fs_options_for_s3_and_s3a():
    options = storage_options_from_config(
        {
            "s3.endpoint": "minio.internal:9000",
            "s3.access-key": "AK",
            "s3.secret-key": "SK",
            "s3.path.style.access": "true",
            "s3.endpoint.region": "eu-central-1",
            "state.checkpoints.dir": "s3://b/c",
        }
    )
    expected = {
        "key": "AK",
        "secret": "SK",
        "client_kwargs": {"endpoint_url": "https://minio.internal:9000", "region_name": "eu-central-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    assert options == {"s3": expected, "s3a": expected}
    assert storage_options_from_config({"s3.path.style.access": "false"})["s3"]["config_kwargs"] == {
        "s3": {"addressing_style": "virtual"}
    }
    assert storage_options_from_config({"s3.endpoint": "http://127.0.0.1:9"})["s3"]["client_kwargs"] == {
        "endpoint_url": "http://127.0.0.1:9"
    }
    assert storage_options_from_config({"state.checkpoints.dir": "s3://b/c"}) == {}


def test_configured_options_are_the_defaults_of_the_process_and_replace_earlier_ones():
    fsspec.config.conf.setdefault("s3", {})["anon"] = False  # set by someone else: kept
    try:
        configure_file_systems({"s3.endpoint": "http://127.0.0.1:1", "s3.access-key": "a"})
        assert storage_options_for("s3://bucket/x") == {
            "key": "a",
            "client_kwargs": {"endpoint_url": "http://127.0.0.1:1"},
        }
        assert storage_options_for("/local/path") == {}
        assert fsspec.config.conf["s3"]["key"] == "a" and fsspec.config.conf["s3"]["anon"] is False
        configure_file_systems({"s3.secret-key": "b"})
        assert fsspec.config.conf["s3"] == {"anon": False, "secret": "b"}
        configure_file_systems({})
        assert fsspec.config.conf["s3"] == {"anon": False}
    finally:
        fsspec.config.conf.pop("s3", None)


def test_metadata_masks_secrets_of_the_configuration():
    meta = CheckpointMetadata(
        job_id="j",
        job_name="n",
        checkpoint_id=1,
        kind="checkpoint",
        trigger_timestamp=0,
        completion_timestamp=0,
        barrier_epoch=0,
        max_parallelism=128,
        operators={},
        driver_state=StreamStateHandle("driver-state", 0, hashlib.sha256(b"").hexdigest()),
        config={"s3.secret-key": "SK", "s3.access-key": "AK", "rest.token": "T", "a.b": 1},
    )
    body = MetadataV1Serializer.serialize(meta)
    assert b"SK" not in body and b'"T"' not in body
    config = MetadataV1Serializer.deserialize(body, "test").config
    assert config == {"s3.secret-key": HIDDEN_VALUE, "rest.token": HIDDEN_VALUE, "s3.access-key": "AK", "a.b": 1}


# -- one suite over both stores -------------------------------------------------------------------
@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def base_uri(request, tmp_path) -> str:
    """The checkpoint directory: a local path, or a prefix in a new bucket (s3.* keys configured)."""
    if request.param == "file":
        return tmp_path.as_uri()
    bucket = request.getfixturevalue("bucket")
    configure_file_systems(request.getfixturevalue("s3_conf"))
    return f"s3://{bucket}/checkpoints"


def test_state_files_are_written_whole_and_verified_on_read(base_uri):
    storage = FsCheckpointStorage(base_uri, "job-a")
    location = storage.initialize_location_for_checkpoint(1)
    data = b"state" * 1000
    handle = storage.write_state(location, "keyed-s1-t0", data)
    assert handle == StreamStateHandle("keyed-s1-t0", len(data), hashlib.sha256(data).hexdigest())
    path = posixpath.join(location, handle.path)
    assert read_verified(storage.fs, path, handle, "test") == data
    assert storage.fs.ls(location, detail=False) == [path], "no temporary file is left next to it"
    write_file(storage.fs, path, data[:-1])
    with pytest.raises(CorruptCheckpointError, match="expected 5000 .*truncated"):
        read_verified(storage.fs, path, handle, "test")
    with pytest.raises(CorruptCheckpointError, match="is missing"):
        read_verified(storage.fs, path + "-gone", handle, "test")


def test_completed_checkpoints_are_those_with_metadata_and_discard_removes_them(base_uri):
    storage = FsCheckpointStorage(base_uri, "job-a")
    for cid in (1, 2, 3):
        location = storage.initialize_location_for_checkpoint(cid)
        storage.write_state(location, "driver-state", b"x")
        if cid != 2:
            storage.write_state(location, "_metadata", b"{}")
    assert storage.list_completed() == [1, 3]
    assert latest_completed(base_uri) == storage.fs.unstrip_protocol(storage.checkpoint_path(3))
    storage.discard_checkpoint(3)
    assert storage.list_completed() == [1]  # seen at once: listings are not served from a cache
    for cid in (1, 2):
        storage.discard_checkpoint(cid)
    storage.discard_job_directory_if_empty()
    assert latest_completed(base_uri) is None


@pytest.mark.s3
def test_a_file_on_s3_is_one_put_of_its_whole_bytes(s3_server, bucket, s3_conf):
    configure_file_systems(s3_conf)
    fs, path = open_file_system(f"s3://{bucket}/job/chk-1/_metadata", storage_options_for("s3://"))
    assert is_object_store(fs)
    data = b'{"x": 1}' * 100
    s3_server.start_recording()
    write_file(fs, path, data)
    s3_server.stop_recording()
    requests = [r for r in s3_server.requests() if r.path.startswith(f"/{bucket}/")]
    assert [(r.method, r.path, r.body) for r in requests] == [("PUT", f"/{bucket}/job/chk-1/_metadata", data)]
    assert not any(r.is_copy for r in requests)


@pytest.mark.s3
def test_writing_into_a_missing_bucket_fails_naming_it_and_creates_no_bucket(s3_server, bucket, s3_conf, s3):
    configure_file_systems(s3_conf)
    storage = FsCheckpointStorage(f"s3://{bucket}-missing/checkpoints", "job-a")
    location = storage.initialize_location_for_checkpoint(1)
    with pytest.raises(CheckpointStorageError, match=f"s3://{bucket}-missing/checkpoints/job-a/chk-1/_metadata"):
        write_file(storage.fs, posixpath.join(location, "_metadata"), b"{}")
    assert not s3.exists(f"{bucket}-missing")
