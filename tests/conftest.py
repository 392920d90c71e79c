"""Shared fixtures: one parametrized storage fixture over local disk, memory and S3 (a real moto server on
127.0.0.1, spoken to through s3fs). Servers are started here and stopped at the end of the session."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

S3_BUCKET = "lakefmt-test"


@dataclass
class Store:
    """Where a test's tables live: a base URI and the storage options to reach it."""

    kind: str
    base: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def uri(self, name: str | None = None) -> str:
        return f"{self.base}/{name or uuid.uuid4().hex}"


def _lock_moto_puts() -> None:
    """moto checks If-None-Match and then writes without a lock, so racing PUTs can both win. AWS's check is
    atomic; this test-only patch makes moto's the same (it must not hide a library bug: the library never
    relies on it beyond what AWS guarantees)."""
    from moto.s3 import responses

    if getattr(responses.S3Response.put_object, "_lakefmt_locked", False):
        return
    lock = threading.Lock()
    original = responses.S3Response.put_object

    def put_object(self: Any) -> Any:
        with lock:
            return original(self)

    put_object._lakefmt_locked = True  # type: ignore[attr-defined]
    responses.S3Response.put_object = put_object  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[dict[str, Any]]:
    """A moto S3 server on 127.0.0.1 (an ephemeral port) with one bucket; yields s3fs storage options."""
    from moto.server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    _lock_moto_puts()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {"key": "testing", "secret": "testing", "endpoint_url": endpoint}
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
    fs.mkdir(S3_BUCKET)
    yield {"storage_options": options, "endpoint": endpoint, "bucket": S3_BUCKET}
    server.stop()


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Store:
    """Each test using it runs on local disk, on memory and on S3 (moto)."""
    kind = request.param
    if kind == "local":
        return Store("local", str(tmp_path))
    if kind == "memory":
        return Store("memory", f"memory://lakefmt-{uuid.uuid4().hex}")
    server = request.getfixturevalue("moto_server")
    return Store("s3", f"s3://{server['bucket']}/{uuid.uuid4().hex}", dict(server["storage_options"]))


@pytest.fixture
def local_store(tmp_path: Any) -> Store:
    return Store("local", str(tmp_path))


@pytest.fixture
def s3_store(moto_server: dict[str, Any]) -> Store:
    return Store("s3", f"s3://{moto_server['bucket']}/{uuid.uuid4().hex}", dict(moto_server["storage_options"]))


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No AWS credential, profile, config file or endpoint in the environment."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
