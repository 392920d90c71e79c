"""Attacks on the fixes for issue 22 (exact row selection, time units, storage errors, null partition spelling,
merge-mode struct fill, unstorable values). Each test in the first part shows a defect that is still there: it
fails on the current code. The tests at the end (marked) are attacks that held, kept as regression guards."""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.errors import (
    InvalidOptionError,
    InvalidStorageOptionError,
    InvalidTimestampError,
    LakefmtError,
    SchemaMismatchError,
    StorageCredentialsError,
    StorageError,
    UnsupportedFilterError,
)

UTC = datetime.UTC


def _history(path: str, appends: int = 3) -> lakefmt.Table:
    schema = pa.schema([("i", pa.int64())])
    t = lakefmt.create_table(path, schema)
    for k in range(appends):
        t.append(pa.table({"i": [k]}, schema=schema))
    return t


def _files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


# ======================================================================================================================
# Defects (each test fails on the current code)
# ======================================================================================================================


def test_naive_datetime_literal_on_a_zoned_timestamp_column_is_a_lakefmt_error(tmp_path: Any) -> None:
    """Found: ``pc.field("ts") > datetime(2020, 6, 1)`` (a naive datetime, what a new user types) on a
    ``timestamp[us, tz=UTC]`` column passes ``check_filter`` (lakefmt/spec/filters.py evaluates the filter on an
    *empty* table, where pyarrow never runs the comparison kernel, so its time-zone check never fires) and then
    every read and ``delete`` raise pyarrow's raw ``ArrowInvalid: Cannot compare timestamp with timezone to
    timestamp without timezone``. Expected: an ``InvalidPredicateError`` (a LakefmtError) naming the column, as
    for any other comparison with a value of another type; actual: raw ArrowInvalid from to_arrow, count and
    delete."""
    schema = pa.schema([("ts", pa.timestamp("us", "UTC"))])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"ts": [datetime.datetime(2020, 1, 1, tzinfo=UTC)]}, schema=schema))
    naive = pc.field("ts") > datetime.datetime(2020, 6, 1)
    with pytest.raises(LakefmtError):
        t.scan(filter=naive).to_arrow()
    with pytest.raises(LakefmtError):
        t.scan(filter=naive).count()
    with pytest.raises(LakefmtError):
        t.delete(naive)
    assert t.scan().count() == 1 and len(t.snapshots()) == 1


def test_uint64_column_compared_with_an_int_literal_is_answered_or_refused_by_lakefmt(tmp_path: Any) -> None:
    """Found: on a ``uint64`` column holding a value of 2**63 or more, ``pc.field("u") == 1`` (an int literal,
    which pyarrow types int64) makes pyarrow cast the column to int64 while reading and raise its raw
    ``ArrowInvalid: Integer value 9223372036854775813 not in range`` from ``scan().to_arrow()`` and ``delete``;
    ``check_filter`` (lakefmt/spec/filters.py) probes an empty table, so it never sees the data-dependent failure.
    (``u > 0`` meanwhile deletes the whole file unread, from statistics.) Expected: the one matching row, or a
    LakefmtError that says to give the literal the column's type (pa.scalar(1, pa.uint64())); actual: raw
    ArrowInvalid."""
    schema = pa.schema([("u", pa.uint64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"u": pa.array([1, 2**63 + 5], pa.uint64())}))
    f = pc.field("u") == 1
    try:
        got = t.scan(filter=f).to_arrow().column("u").to_pylist()
    except LakefmtError:
        got = None
    assert got in (None, [1])
    try:
        t.delete(f)
    except LakefmtError:
        assert t.scan().count() == 2
    else:
        assert t.scan().to_arrow().column("u").to_pylist() == [2**63 + 5]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -5, datetime.timedelta(days=-1)])
@pytest.mark.parametrize("method", ["expire_snapshots", "remove_orphan_files"])
def test_hostile_older_than_is_an_invalid_option_error(tmp_path: Any, method: str, value: Any) -> None:
    """Found: ``older_than`` given as NaN raises Python's raw ``ValueError: cannot convert float NaN to integer``,
    infinity a raw ``OverflowError``, and a negative number or timedelta a plain ``ValueError`` (not a
    LakefmtError), from ``duration_ms`` in lakefmt/options.py (``int(value * 1000)`` unchecked). ``create_tag``'s
    ``retain`` wraps the same values in ``InvalidOptionError`` (lakefmt/meta/tags.py ``check_retain``), and the
    string ``'-7d'`` is an InvalidOptionError too. Expected: InvalidOptionError for every one; actual: ValueError /
    OverflowError."""
    t = _history(str(tmp_path / "t"))
    kwargs = {"dry_run": True} if method == "remove_orphan_files" else {}
    with pytest.raises(InvalidOptionError):
        getattr(t, method)(older_than=value, **kwargs)
    assert len(t.snapshots()) == 3


def test_a_numpy_integer_older_than_is_seconds_like_a_numpy_float(tmp_path: Any) -> None:
    """Found: a number of seconds is a duration, and ``np.float64(3600)`` is taken, but ``np.int64(3600)`` (what a
    pandas or numpy computation hands over) is refused with ``TypeError: a duration must be a timedelta, a string
    like '7d' or seconds`` -- it *is* seconds. ``duration_ms`` in lakefmt/options.py tests ``isinstance(value,
    int | float)`` where ``as_of`` (lakefmt/spec/instants.py) takes any ``numbers.Integral``. Expected: np.int64
    accepted as seconds, as int and np.float64 are; actual: TypeError."""
    t = _history(str(tmp_path / "t"))
    t.expire_snapshots(older_than=np.float64(3600))
    t.expire_snapshots(older_than=np.int64(3600))
    t.remove_orphan_files(older_than=np.int32(3600), dry_run=True)
    assert len(t.snapshots()) == 3


def test_a_string_bound_longer_than_256_bytes_is_not_stored(tmp_path: Any) -> None:
    """Found: the format spec (docs/format.md, column statistics) says min and max are null when a string or binary
    bound is longer than 256 bytes ("lakefmt never stores a truncated bound; it stores none"), and
    lakefmt/write/stats.py says the same (MAX_STAT_BYTES), but ``StatsCollector.result`` checks the length only when
    a file has several row groups: a file of one row group (most files) keeps a 300-byte max in its manifest entry.
    Expected: min and max null for both columns; actual: a 300-byte string max and a 300-byte binary max stored."""
    schema = pa.schema([("s", pa.string()), ("b", pa.binary())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"s": ["a", "z" * 300], "b": [b"a", b"\xff" * 300]}, schema=schema))
    stats = t.scan().entries().column("field_stats").to_pylist()[0]
    assert {k: (v["min"], v["max"]) for k, v in stats.items()} == {"1": (None, None), "2": (None, None)}


def test_a_map_of_timestamp_seconds_beyond_parquet_is_refused_as_a_lakefmt_error(tmp_path: Any) -> None:
    """Found: values a data file cannot hold are refused "at any depth" (commit 26ea5e7), but
    ``_unstorable``/``_holds_seconds`` in lakefmt/write/conform.py walk structs and lists only, not maps: appending a
    ``map<string, timestamp[s]>`` whose value is 2**62 seconds raises pyarrow's raw ``ArrowInvalid: Integer
    overflow when casting timestamp value ... from timestamp[s] to timestamp[ms]`` from the Parquet writer.
    Expected: SchemaMismatchError naming the column, as for the same value in a struct or a list; actual: raw
    ArrowInvalid."""
    typ = pa.map_(pa.string(), pa.timestamp("s"))
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("m", typ)]))
    with pytest.raises(SchemaMismatchError, match="'m"):
        t.append(pa.table({"m": pa.array([[("k", 2**62)]], typ)}))
    assert t.scan().count() == 0


def test_merge_append_fills_a_nullable_field_missing_in_a_struct_inside_a_list(tmp_path: Any) -> None:
    """Found: merge-mode append "fills a nullable field missing inside a struct (at any depth) with nulls"
    (commit d255e2f, lakefmt/write/conform.py ``fill_missing``), and does so for a struct inside a struct, but not
    for the struct elements of a list (or a map's struct values): data of ``list<struct<a>>`` for a column of
    ``list<struct<a, b>>`` (b nullable) is refused with SchemaMismatchError. Expected: appended, b null; actual:
    SchemaMismatchError."""
    inner = pa.struct([("a", pa.int64()), ("b", pa.string())])
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("x", pa.list_(inner))]))
    data = pa.array([[{"a": 1}]], pa.list_(pa.struct([("a", pa.int64())])))
    t.append(pa.table({"x": data}), schema_mode="merge")
    assert t.scan().to_arrow().column("x").to_pylist() == [[{"a": 1, "b": None}]]
    # a null list, an empty one and a sliced array keep their rows; a map's struct items are filled the same way
    more = pa.array([None, [], [{"a": 2}, {"a": 3}]], pa.list_(pa.struct([("a", pa.int64())]))).slice(1)
    t.append(pa.table({"x": more}), schema_mode="merge")
    b_null = [{"a": 1, "b": None}], [], [{"a": 2, "b": None}, {"a": 3, "b": None}]
    assert t.scan().to_arrow().column("x").to_pylist() == list(b_null)
    m = lakefmt.create_table(str(tmp_path / "m"), pa.schema([("y", pa.map_(pa.string(), inner))]))
    items = pa.array([[("k", {"a": 5})], None], pa.map_(pa.string(), pa.struct([("a", pa.int64())])))
    m.append(pa.table({"y": items}), schema_mode="merge")
    assert m.scan().to_arrow().column("y").to_pylist() == [[("k", {"a": 5, "b": None})], None]


def test_compact_partition_message_does_not_contradict_itself(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a string partition value that is literally ``__null__`` is printed ``dt=__null__`` exactly as the
    null partition is (``describe_partition`` in lakefmt/spec/partition.py), so ``lakefmt files`` shows the two
    alike and ``lakefmt compact --partition dt=__null__,n=1`` (copied from that listing) answers "the table has no
    live file in partition dt=__null__,n=1 (partitions found: ..., dt=__null__,n=1, ...)": the error contradicts
    itself in one line, the defect issue 22 item 5 asked to remove. Expected: the found partitions spelled so that
    the spelling given is not among them (or so that it reaches that partition); actual: the same spelling on both
    sides."""
    schema = pa.schema([("i", pa.int64()), ("dt", pa.string()), ("n", pa.int32())])
    path = str(tmp_path / "t")
    t = lakefmt.create_table(path, schema, partition_by=["dt", "n"])
    t.append(pa.table({"i": [1, 2], "dt": [None, "__null__"], "n": [None, 1]}, schema=schema))
    code = main(["compact", path, "--partition", "dt=__null__,n=1", "--dry-run"])
    err = capsys.readouterr().err
    if code != 0:
        _asked, _, found = err.partition("(partitions found:")
        assert "dt=__null__,n=1" not in found, err
    # the text value is spelled as its folder and the listings have it, and that spelling reaches it
    assert main(["files", path, "--json"]) == 0
    listed = capsys.readouterr().out
    assert "%5F_null__" in listed
    assert main(["compact", path, "--partition", "dt=%5F_null__,n=1", "--dry-run"]) == 0
    assert "no live file" not in capsys.readouterr().err


# -- storage options (moto) -----------------------------------------------------------------------------------------
def _s3_table(moto_server: dict[str, Any]) -> str:
    uri = f"s3://{moto_server['bucket']}/{uuid.uuid4().hex}"
    t = lakefmt.create_table(uri, pa.schema([("id", pa.int64())]), storage_options=moto_server["storage_options"])
    t.append(pa.table({"id": [1, 2]}))
    return uri


def test_a_delta_key_set_to_none_is_not_the_text_none() -> None:
    """Found: ``s3_storage_options`` (lakefmt/io/storage.py) turns every translated value into ``str(value)``, so
    ``{"AWS_ACCESS_KEY_ID": os.environ.get("KEY")}`` with the variable unset becomes the access key ``"None"``
    (s3fs's own ``key=None`` means "from the environment"), and ``AWS_ENDPOINT_URL=None`` the endpoint ``"None"``.
    Expected: a None value left out (or refused); actual: the text 'None'."""
    from lakefmt.io.storage import s3_storage_options

    out = s3_storage_options({"AWS_ACCESS_KEY_ID": None, "AWS_ENDPOINT_URL": None})
    assert out.get("key") != "None" and out.get("endpoint_url") != "None", out


@pytest.mark.parametrize("endpoint", ["{host}", " {url} ", "None"])
def test_a_malformed_endpoint_is_a_storage_option_error(moto_server: dict[str, Any], endpoint: str) -> None:
    """Found: an ``AWS_ENDPOINT_URL`` (or ``endpoint_url``) without a scheme (``127.0.0.1:9000``, as MinIO users
    often write it), with surrounding spaces, or the text ``None`` reaches botocore, whose raw ``ValueError: Invalid
    endpoint`` / ``EndpointResolutionError`` escapes ``open_table`` (lakefmt/io/storage.py ``storage_error``
    explains neither). Expected: InvalidStorageOptionError naming the option; actual: ValueError /
    EndpointResolutionError."""
    uri = _s3_table(moto_server)
    url = moto_server["endpoint"]
    value = endpoint.format(host=url.split("://", 1)[1], url=url)
    options = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ENDPOINT_URL": value}
    with pytest.raises(InvalidStorageOptionError, match=r"(?i)endpoint"):
        lakefmt.open_table(uri, options)


def test_a_missing_aws_profile_is_a_credentials_error(moto_server: dict[str, Any], no_aws_env: None) -> None:
    """Found: ``AWS_PROFILE`` (a translated deltalake key) naming a profile that does not exist raises botocore's
    raw ``ProfileNotFound`` from ``open_table`` (and the CLI prints 'ProfileNotFound: ...'), while missing keys are a
    StorageCredentialsError that says what to do (lakefmt/io/storage.py ``storage_error``). Expected:
    StorageCredentialsError (a LakefmtError); actual: botocore.exceptions.ProfileNotFound."""
    uri = _s3_table(moto_server)
    with pytest.raises(StorageCredentialsError):
        lakefmt.open_table(uri, {"AWS_ENDPOINT_URL": moto_server["endpoint"], "AWS_PROFILE": "no-such-profile"})


def test_an_invalid_region_is_a_storage_option_error(moto_server: dict[str, Any]) -> None:
    """Found: ``AWS_REGION="eu west 1"`` (a typo) raises botocore's raw ``InvalidRegionError`` from ``open_table``.
    Expected: InvalidStorageOptionError naming the region option; actual: botocore.exceptions.InvalidRegionError."""
    uri = _s3_table(moto_server)
    options = {**moto_server["storage_options"], "AWS_REGION": "eu west 1"}
    with pytest.raises(InvalidStorageOptionError):
        lakefmt.open_table(uri, options)


@pytest.fixture
def own_moto() -> Iterator[tuple[Any, dict[str, Any]]]:
    """A moto server of this test's own (the test stops it), with one bucket."""
    import s3fs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://{host}:{port}",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {"connect_timeout": 1, "retries": {"total_max_attempts": 1}},
    }
    fs = s3fs.S3FileSystem(
        skip_instance_cache=True, key="testing", secret="testing", endpoint_url=options["endpoint_url"]
    )
    fs.mkdir("dropped")
    try:
        yield server, options
    finally:
        with contextlib.suppress(Exception):  # stopped by the test already
            server.stop()


def test_a_dropped_endpoint_after_open_is_a_lakefmt_error(own_moto: tuple[Any, dict[str, Any]]) -> None:
    """Found: ``open_table`` and ``create_table`` explain an unreachable endpoint (StorageUnreachableError), and the
    CLI does so for every command, but once a table is open in Python, the endpoint going away (a dropped
    connection, a restarted MinIO) makes ``snapshots()``, ``scan().to_arrow()`` and ``append`` raise botocore's raw
    ``EndpointConnectionError``: lakefmt/io/storage.py ``storage_errors`` wraps only the opening. Expected:
    StorageUnreachableError (a LakefmtError) naming the endpoint; actual: botocore.exceptions.EndpointConnectionError
    from every call."""
    server, options = own_moto
    uri = f"s3://dropped/{uuid.uuid4().hex}"
    t = lakefmt.create_table(uri, pa.schema([("id", pa.int64())]), storage_options=options)
    t.append(pa.table({"id": [1]}))
    server.stop()
    for call in (t.snapshots, lambda: t.scan().to_arrow(), lambda: t.append(pa.table({"id": [2]}))):
        with pytest.raises(StorageError):
            call()


# ======================================================================================================================
# Regression guards: attacks that held (these pass on the current code)
# ======================================================================================================================


@pytest.mark.parametrize(
    "filter",
    [pc.field(0) < 1, pc.field("s", 0) > 0, pc.field(("s", 1)) > 1, ~(pc.field(1) == 2)],
    ids=["top", "nested-name-then-index", "tuple-path-index", "inverted"],
)
def test_guard_positional_references_of_every_shape_are_refused(tmp_path: Any, filter: pc.Expression) -> None:
    """Held: a positional reference, at the top or inside a nested path, is refused by every read and by delete,
    and the refused delete leaves the table as it was."""
    schema = pa.schema([("s", pa.struct([("x", pa.float64()), ("y", pa.int64())])), ("i", pa.int64())])
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    t.append(pa.table({"s": [{"x": 1.0, "y": 1}, {"x": math.nan, "y": 2}], "i": [1, 2]}, schema=schema))
    with pytest.raises(UnsupportedFilterError):
        t.scan(filter=filter).to_arrow()
    with pytest.raises(UnsupportedFilterError):
        t.delete(filter)
    assert t.scan().count() == 2 and len(t.snapshots()) == 1


def test_guard_nan_in_nested_and_top_level_floats_reaches_every_engine(tmp_path: Any) -> None:
    """Held: NaN rows (a top-level float32 and a float inside a struct) are kept by is_nan, != -inf and
    ~(x < 0) in to_arrow, count, the Arrow stream, DuckDB, Polars and pandas, as pyarrow keeps them."""
    nan = math.nan
    schema = pa.schema([("s", pa.struct([("x", pa.float64())])), ("f", pa.float32()), ("i", pa.int64())])
    data = [
        {"s": [{"x": nan}, {"x": 1.0}, None], "f": [nan, -0.0, 1.0], "i": [1, 2, 3]},
        {"s": [{"x": -math.inf}, {"x": 2.0}, {"x": None}], "f": [-math.inf, 2.0, None], "i": [4, 5, 6]},
    ]
    t = lakefmt.create_table(str(tmp_path / "t"), schema)
    for d in data:
        t.append(pa.table(d, schema=schema))
    full = pa.concat_tables([pa.table(d, schema=schema) for d in data])
    for f in [
        pc.field("s", "x").is_nan(),
        pc.field("s", "x") != -math.inf,
        ~(pc.field("s", "x") < 0),
        pc.field("f").is_nan(),
        pc.field("f") != -math.inf,
        (pc.field("i") > 3) | pc.field("f").is_nan(),
    ]:
        want = sorted(full.filter(f).column("i").to_pylist())
        scan = t.scan(filter=f)
        assert sorted(scan.to_arrow().column("i").to_pylist()) == want, f
        assert scan.count() == len(want), f
        assert sorted(pa.table(scan).column("i").to_pylist()) == want, f
        assert sorted(r[0] for r in scan.to_duckdb().select("i").fetchall()) == want, f
        assert sorted(scan.to_polars().collect()["i"].to_list()) == want, f
        assert sorted(scan.to_pandas()["i"].tolist()) == want, f


def test_guard_interrupt_while_a_delete_reads_leaves_the_table_and_no_files(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: a KeyboardInterrupt raised by the read of a delete's rewrite (after its first batch) leaves the table's
    snapshots and rows as they were, and no data file behind."""
    import lakefmt.rewrite.delete as delete_module

    schema = pa.schema([("i", pa.int64()), ("dt", pa.string())])
    root = str(tmp_path / "t")
    t = lakefmt.create_table(root, schema, partition_by=["dt"])
    for k in range(3):
        t.append(pa.table({"i": list(range(k * 10, k * 10 + 10)), "dt": ["a"] * 5 + ["b"] * 5}, schema=schema))
    before = _files(root)
    original = delete_module.read_inputs

    def interrupted(*args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        batches = original(*args, **kwargs)
        yield next(batches)
        raise KeyboardInterrupt

    monkeypatch.setattr(delete_module, "read_inputs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        t.delete(pc.field("i") < 3)
    assert len(t.snapshots()) == 3 and t.scan().count() == 30
    assert not [f for f in _files(root) - before if f.endswith(".parquet")]


def test_guard_as_of_forms_agree(tmp_path: Any) -> None:
    """Held: an aware datetime, the same instant naive (UTC), in another zone, as an ISO string with an offset or a
    lower-case z, as int, numpy int64, a pandas Timestamp (aware, naive, with nanoseconds) all pick one snapshot;
    a float (time.time()-style) and numpy float64 are refused with InvalidTimestampError."""
    import zoneinfo

    t = _history(str(tmp_path / "t"))
    first = t.snapshots()[0]
    ms = first.time_millis
    aware = datetime.datetime.fromtimestamp(ms / 1000, UTC)
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    for value in [
        aware,
        aware.replace(tzinfo=None),
        aware.astimezone(zoneinfo.ZoneInfo("America/New_York")),
        aware.astimezone(plus2).isoformat(),
        aware.isoformat().replace("+00:00", "z"),
        ms,
        str(ms),
        np.int64(ms),
        pd.Timestamp(aware),
        pd.Timestamp(aware.replace(tzinfo=None)),
        pd.Timestamp(ms * 10**6 + 999_999, unit="ns", tz="UTC"),
    ]:
        assert t.scan(as_of=value).snapshot.id == first.id, repr(value)
    for bad in [float(ms), np.float64(ms), "1.5e12"]:
        with pytest.raises(InvalidTimestampError):
            t.scan(as_of=bad)


@pytest.mark.parametrize("value", ["5", "nan", "inf", "-1d", "1e3s", "PT0.0001S", ""])
def test_guard_cli_older_than_needs_a_unit(tmp_path: Any, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Held: the CLI refuses a bare number, NaN, infinity, a negative or malformed duration as a usage error and
    expires nothing."""
    path = str(tmp_path / "t")
    t = _history(path)
    with pytest.raises(SystemExit) as info:
        main(["expire", path, f"--older-than={value}"])
    assert info.value.code == 2
    assert "older-than" in capsys.readouterr().err
    assert len(t.snapshots()) == 3


@pytest.mark.parametrize(
    "typ",
    [pa.timestamp("s"), pa.struct([("t", pa.timestamp("s", "UTC"))]), pa.list_(pa.timestamp("s"))],
    ids=["top", "struct", "list"],
)
def test_guard_unstorable_seconds_in_structs_and_lists_are_refused(tmp_path: Any, typ: pa.DataType) -> None:
    """Held: timestamp[s] values beyond int64 milliseconds are refused with SchemaMismatchError at the top level,
    in a struct and in a list, and nothing is written."""
    t = lakefmt.create_table(str(tmp_path / "t"), pa.schema([("x", typ)]))
    value: Any = 2**62
    if pa.types.is_struct(typ):
        value = {"t": 2**62}
    elif pa.types.is_list(typ):
        value = [2**62]
    with pytest.raises(SchemaMismatchError):
        t.append(pa.table({"x": pa.array([value], typ)}))
    assert t.scan().count() == 0 and t.snapshots() == []


def test_guard_delta_keys_with_hostile_spellings(moto_server: dict[str, Any]) -> None:
    """Held: two spellings of one option with different values, a client_kwargs that is not a dict, an unknown key
    of another store and a non-text key are each an InvalidStorageOptionError before any request."""
    uri = _s3_table(moto_server)
    base = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    endpoint = moto_server["endpoint"]
    for options in [
        {**base, "AWS_ENDPOINT_URL": endpoint, "endpoint_url": endpoint + "/"},
        {**base, "AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "client_kwargs": "x"},
        {**base, "AWS_ENDPOINT_URL": endpoint, "google_service_account": "x"},
        {**base, "AWS_ENDPOINT_URL": endpoint, 1: "x"},
    ]:
        with pytest.raises(InvalidStorageOptionError):
            lakefmt.open_table(uri, options)  # type: ignore[arg-type]
