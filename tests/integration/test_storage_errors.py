"""Issue 22, "Errors a user should never see raw", in Python: missing credentials, a bucket that does not exist
and delta-rs-style storage option keys get the clear messages the CLI gives, against a real (moto) S3 server."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.errors import (
    BucketNotFoundError,
    InvalidStorageOptionError,
    LakefmtError,
    NotATableError,
    StorageCredentialsError,
    StorageUnreachableError,
)

SCHEMA = pa.schema([("id", pa.int64())])


def _table(moto_server: dict[str, Any]) -> str:
    uri = f"s3://{moto_server['bucket']}/{uuid.uuid4().hex}"
    t = lakefmt.create_table(uri, SCHEMA, storage_options=moto_server["storage_options"])
    t.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    return uri


def test_missing_credentials_are_a_lakefmt_error(moto_server: dict[str, Any], no_aws_env: None) -> None:
    uri = _table(moto_server)
    endpoint = {"endpoint_url": moto_server["endpoint"]}
    for attempt in (
        lambda: lakefmt.open_table(uri, endpoint),
        lambda: lakefmt.create_table(f"{uri}-new", SCHEMA, storage_options=endpoint),
    ):
        with pytest.raises(StorageCredentialsError) as info:
            attempt()
        message = str(info.value)
        assert isinstance(info.value, LakefmtError)
        assert "credentials" in message and "AWS_ACCESS_KEY_ID" in message and "key" in message, message


def test_a_bucket_that_does_not_exist_is_named(moto_server: dict[str, Any]) -> None:
    options = moto_server["storage_options"]
    bucket = f"lakefmt-missing-{uuid.uuid4().hex[:12]}"
    with pytest.raises(BucketNotFoundError) as info:
        lakefmt.open_table(f"s3://{bucket}/t", options)
    assert isinstance(info.value, NotATableError)  # what callers that create a missing table catch
    assert f"bucket {bucket!r} does not exist" in str(info.value)
    with pytest.raises(BucketNotFoundError, match="does not exist"):  # it used to retry 8 times, state unknown
        lakefmt.create_table(f"s3://{bucket}/t", SCHEMA, storage_options=options)


@pytest.mark.parametrize("upper", [True, False])
def test_delta_rs_storage_keys_are_translated(moto_server: dict[str, Any], no_aws_env: None, upper: bool) -> None:
    uri = _table(moto_server)
    delta = {
        "AWS_ENDPOINT_URL": moto_server["endpoint"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "session",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    options = {(k if upper else k.lower()): v for k, v in delta.items()}
    t = lakefmt.open_table(uri, options)
    assert t.to_arrow().column("id").to_pylist() == [1, 2]
    t.append(pa.table({"id": [3]}, schema=SCHEMA))
    assert lakefmt.open_table(uri, moto_server["storage_options"]).to_arrow().num_rows == 3


def test_translated_options_are_s3fs_options() -> None:
    from lakefmt.io.storage import s3_storage_options

    assert s3_storage_options(
        {
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
            "aws_access_key_id": "0042",
            "AWS_SECRET_ACCESS_KEY": "s3cr3t",
            "aws_session_token": "tok",
            "AWS_REGION": "eu-west-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
            "AWS_SKIP_SIGNATURE": "false",
        }
    ) == {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "0042",
        "secret": "s3cr3t",
        "token": "tok",
        "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
        "anon": False,
    }
    # s3fs's own keys pass through untouched; the region merges into client_kwargs
    assert s3_storage_options({"key": "k", "client_kwargs": {"verify": False}, "region": "x"}) == {
        "key": "k",
        "client_kwargs": {"verify": False, "region_name": "x"},
    }


def test_bad_storage_options_are_named_and_secrets_kept_out(moto_server: dict[str, Any]) -> None:
    uri = _table(moto_server)
    options = moto_server["storage_options"]
    with pytest.raises(InvalidStorageOptionError, match=r"'regoin'.*region") as info:
        lakefmt.open_table(uri, {**options, "regoin": "x"})
    assert isinstance(info.value, lakefmt.InvalidOptionError)
    with pytest.raises(InvalidStorageOptionError, match="AWS_SECRET_ACCESS_KEY") as info:
        lakefmt.open_table(uri, {**options, "AWS_SECRET_ACCESS_KEY": "Sup3rSecretValue"})
    assert "Sup3rSecretValue" not in str(info.value) and "testing" not in str(info.value)
    with pytest.raises(InvalidStorageOptionError, match="AWS_ALLOW_HTTP"):
        lakefmt.open_table(uri, {**options, "AWS_ALLOW_HTTP": "maybe"})


def test_an_endpoint_that_refuses_connections(moto_server: dict[str, Any]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = {
        **moto_server["storage_options"],
        "endpoint_url": f"http://127.0.0.1:{port}",
        "config_kwargs": {"connect_timeout": 1, "retries": {"total_max_attempts": 1}},
    }
    with pytest.raises(StorageUnreachableError, match=f"cannot connect to http://127.0.0.1:{port}"):
        lakefmt.open_table(f"s3://{moto_server['bucket']}/t", options)
