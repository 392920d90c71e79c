"""The ``lakefmt`` command end to end: a subprocess of the real command against tables on local disk and on S3
(a moto server, reached with ``-o endpoint_url=... -o key=... -o secret=...``). Independent commands run as
parallel processes to keep the suite quick."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.io import file_io_for
from lakefmt.maintenance import FileClass, classify, referenced_files
from lakefmt.meta.store import MetaStore
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
REPORT_KEYS = {
    "operation",
    "dry_run",
    "expired_snapshots",
    "kept_snapshots",
    "retained_snapshots",
    "files",
    "total_files",
    "total_bytes",
    "paths",
}
#: an expire report also says what held snapshots back, and which records and tags it deleted
EXPIRE_KEYS = {"held_back", "expired_consumers", "expired_tags", "retention", "kept_reason"}

Result = subprocess.CompletedProcess[str]


def _opts(store: Any) -> list[str]:
    return [arg for k, v in store.storage_options.items() for arg in ("-o", f"{k}={v}")]


def _cli_many(commands: Sequence[Sequence[str]]) -> list[Result]:
    """Run several ``lakefmt`` commands as parallel subprocesses; results in order."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lakefmt.cli", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for cmd in commands
    ]
    results = []
    for cmd, proc in zip(commands, procs, strict=True):
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(list(cmd), proc.returncode, out, err))
    return results


def _cli(*cmd: str) -> Result:
    return _cli_many([cmd])[0]


def _ok(r: Result) -> Result:
    assert r.returncode == 0, f"{r.args}: exit {r.returncode}\n{r.stderr}"
    assert "Traceback" not in r.stderr
    return r


def _json(r: Result) -> Any:
    return json.loads(_ok(r).stdout)


def _failed(r: Result, code: int) -> str:
    """The command exited with ``code``, printing an error (no traceback) on stderr; returns stderr."""
    assert r.returncode == code, f"{r.args}: exit {r.returncode}, expected {code}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert r.stderr.strip(), "no error message"
    return r.stderr


def _history(store: Any) -> lakefmt.Table:
    """Six snapshots with a partition overwrite and a whole-table overwrite in them."""
    t = create_table_in(store, SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1, 2, 3], "dt": ["a", "b", "c"]}, schema=SCHEMA))
    t.append(pa.table({"id": [4, 5], "dt": ["a", "b"]}, schema=SCHEMA))
    t.overwrite(pa.table({"id": [6], "dt": ["a"]}, schema=SCHEMA), partition={"dt": "a"})
    t.overwrite(pa.table({"id": [7, 8], "dt": ["b", "d"]}, schema=SCHEMA))
    t.append(pa.table({"id": [9], "dt": ["a"]}, schema=SCHEMA))
    t.append(pa.table({"id": [10, 11], "dt": ["d", "e"]}, schema=SCHEMA))
    return t


def _garbage(t: lakefmt.Table) -> set[str]:
    """Files of a write whose commit never happened, and a temp file of an interrupted publish."""
    writer = t.new_writer()
    with writer:
        writer.write(pa.table({"id": [100], "dt": ["a"]}, schema=SCHEMA))
        message = writer.prepare_commit()
    paths = {f.path for f in writer.written_files} | {layout.manifest_path(m.file_name) for m in message.manifests}
    tmp = t.io.new_temp_name(layout.snapshot_path(7))
    t.io.write(tmp, b"partial")
    return paths | {tmp}


@pytest.fixture(params=["local", "s3"])
def cli_store(request: pytest.FixtureRequest, local_store: Any) -> Any:
    if request.param == "local":
        return local_store
    return request.getfixturevalue("s3_store")


# -- usage -------------------------------------------------------------------------------------------------------


def test_help_and_bad_usage(local_store: Any) -> None:
    t = _history(local_store)
    before = file_listing(t.io)
    uri = t.uri
    top, expire_help, unknown, bad_age, zero_min, max_below_min, bad_option, no_command = _cli_many(
        [
            ["--help"],
            ["expire", "--help"],
            ["expire", uri, "--retain-max", "1", "--bogus"],
            ["orphan-clean", uri, "--older-than", "7x"],
            ["expire", uri, "--retain-min", "0"],
            ["expire", uri, "--retain-min", "3", "--retain-max", "2"],
            ["snapshots", uri, "-o", "novalue"],
            [],
        ]
    )
    text = _ok(top).stdout
    assert "examples:" in text
    for command in ("snapshots", "describe", "files", "expire", "orphan-clean"):
        assert command in text
    assert "lakefmt expire " in text and "--older-than 7d" in text and "-o endpoint_url=" in text
    help_text = _ok(expire_help).stdout
    assert "example" in help_text
    for flag in ("--retain-min", "--retain-max", "--older-than", "--dry-run", "--json", "-o KEY=VALUE"):
        assert flag in help_text

    assert "--bogus" in _failed(unknown, 2)
    assert "7x" in _failed(bad_age, 2) and "--older-than" in bad_age.stderr
    assert "--retain-min" in _failed(zero_min, 2)
    assert "--retain-max" in _failed(max_below_min, 2)
    assert "novalue" in _failed(bad_option, 2)
    _failed(no_command, 2)
    for r in (unknown, bad_age, zero_min, max_below_min):
        assert r.stdout == ""
    assert file_listing(t.io) == before, "a command refused for bad usage still changed the table"


# -- errors ------------------------------------------------------------------------------------------------------


def test_not_a_table_and_other_expected_errors(local_store: Any) -> None:
    uri = local_store.uri()
    io = file_io_for(uri)
    io.write("data/old.parquet", b"someone else's file")
    io.write("manifest/manifest-x-1", b"?")
    io.write("snapshot/snapshot-1", b"{}")
    before = {f.path for f in io.walk()}
    missing = local_store.uri()
    t = _history(local_store)
    results = _cli_many(
        [
            ["snapshots", uri],
            ["expire", uri, "--retain-max", "1", "--older-than", "0s"],
            ["orphan-clean", uri, "--older-than", "0s", "--json"],
            ["describe", missing, "--json"],
            ["files", t.uri, "--snapshot", "99"],
        ]
    )
    for r in results:
        err = _failed(r, 1)
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("lakefmt: error:")
        assert r.stdout == ""
    for r in results[:4]:
        assert "not a lakefmt table" in r.stderr
    assert "does not exist" in results[4].stderr
    assert {f.path for f in io.walk()} == before, "a command touched a location that is not a table"


def test_errors_on_s3(s3_store: Any) -> None:
    """-o options reach s3fs; a prefix that holds no table and a bucket that does not exist are each one line
    on stderr and exit 1, and the stranger's files stay."""
    opts = _opts(s3_store)
    uri = s3_store.uri()
    io = file_io_for(uri, s3_store.storage_options)
    io.write("data/old.parquet", b"someone else's file")
    bucketless = f"s3://lakefmt-missing-{uuid.uuid4().hex[:12]}/t"
    results = _cli_many(
        [
            ["orphan-clean", uri, "--older-than", "0s", *opts],
            ["describe", bucketless, *opts],
        ]
    )
    for r in results:
        err = _failed(r, 1)
        assert len(err.strip().splitlines()) == 1 and err.startswith("lakefmt: error:"), err
        assert "not a lakefmt table" in err
        assert s3_store.storage_options["secret"] not in err
    assert [f.path for f in io.walk()] == ["data/old.parquet"]


# -- failures of the environment: one line, the right exit code, within seconds (issue 12, item 13) ----------


def _iso(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.UTC).isoformat(timespec="milliseconds")


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _no_aws_env(tmp_path: Any) -> dict[str, str]:
    """This process's environment without any AWS credential, profile, config file or endpoint."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-aws-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-aws-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"  # no instance-metadata probe: the test does not depend on the network
    return env


def _timed_cli_many(runs: Sequence[tuple[Sequence[str], dict[str, str]]]) -> list[tuple[Result, float]]:
    """Run ``lakefmt`` commands, or ``["-c", code]`` scripts, each with its environment, as many at a time as
    there are CPUs (more would time the CPU contention of their start-up, not the commands); results in order,
    each with its elapsed seconds."""

    def run(cmd: Sequence[str], env: dict[str, str]) -> tuple[Result, float]:
        argv = [sys.executable, *cmd] if cmd[:1] == ["-c"] else [sys.executable, "-m", "lakefmt.cli", *cmd]
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        return subprocess.CompletedProcess(list(cmd), r.returncode, r.stdout, r.stderr), time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda item: run(*item), runs))


def test_storage_options_are_parsed_by_type() -> None:
    """``-o anon=false`` used to reach s3fs as the (true) string "false"."""
    from lakefmt.cli import _storage_options

    opts = _storage_options(
        [
            "anon=false",
            "requester_pays=TRUE",
            "max_concurrency=4",
            "listings_expiry_time=2.5",
            'config_kwargs={"connect_timeout": 7, "retries": {"total_max_attempts": 9}}',
            "profile=1234",
            "key=0042",
            "secret=true",
            "endpoint_url=http://127.0.0.1:9000",
            "cache_type=readahead",
        ]
    )
    assert opts == {
        "anon": False,
        "requester_pays": True,
        "max_concurrency": 4,
        "listings_expiry_time": 2.5,
        "config_kwargs": {"connect_timeout": 7, "retries": {"total_max_attempts": 9}},
        "profile": "1234",  # credentials and endpoints stay strings, whatever they look like
        "key": "0042",
        "secret": "true",
        "endpoint_url": "http://127.0.0.1:9000",
        "cache_type": "readahead",
    }
    assert type(opts["anon"]) is bool and type(opts["max_concurrency"]) is int
    with pytest.raises(argparse.ArgumentTypeError, match="client_kwargs") as exc:
        _storage_options(['client_kwargs={"aws_secret_access_key": "s3cr3t"'])
    assert "s3cr3t" not in str(exc.value)


def test_cli_s3_defaults_give_up_quickly_unless_told_otherwise() -> None:
    from lakefmt.cli import _s3_defaults

    filled = _s3_defaults({"key": "k"})
    assert filled["config_kwargs"]["connect_timeout"] <= 5
    assert filled["config_kwargs"]["read_timeout"] <= 5
    assert filled["config_kwargs"]["retries"]["total_max_attempts"] <= 3
    mine = {"config_kwargs": {"connect_timeout": 60, "read_timeout": 60, "retries": {"max_attempts": 10}}}
    assert _s3_defaults(mine)["config_kwargs"] == mine["config_kwargs"]


def test_environment_failures_are_one_line_and_quick(
    moto_server: dict[str, Any], s3_store: Any, local_store: Any, tmp_path: Any
) -> None:
    """No credentials, a refused endpoint, an unknown storage option, a bucketless URI, an age too long for a
    timedelta, ``-o anon=false`` read as a string, a snapshot id of 0 and a missing s3fs: each used to print a
    traceback (or, for anon=false, to read anonymously); each is now one line on stderr, exit 1 or 2 (bad
    usage), in seconds rather than after botocore's retry storm. An endpoint that accepts connections and never
    answers used to hold the command for minutes (s3fs's 15 s read timeout, botocore's attempts, s3fs's
    retries); now it fails after two 5 s attempts."""
    t = _history(s3_store)  # a table on moto: anonymous reads work there, signed ones need credentials
    before = file_listing(t.io)
    endpoint = ["-o", f"endpoint_url={moto_server['endpoint']}"]
    creds = ["-o", "key=testing", "-o", "secret=Sup3rSecretValue"]
    no_aws = _no_aws_env(tmp_path)
    local = _history(local_store).uri
    closed = f"http://127.0.0.1:{_closed_port()}"
    silent_socket = socket.socket()  # accepts connections (the kernel does) and never answers
    silent_socket.bind(("127.0.0.1", 0))
    silent_socket.listen(16)
    silent = f"http://127.0.0.1:{silent_socket.getsockname()[1]}"
    missing_s3fs = (
        "import sys; sys.modules['s3fs'] = None\n"
        "from lakefmt.cli import main\n"
        f"sys.exit(main(['describe', {t.uri!r}, '-o', 'endpoint_url={moto_server['endpoint']}']))"
    )
    missing_s3fs_snapshots = (
        "import sys; sys.modules['s3fs'] = None\n"
        "from lakefmt.cli import main\n"
        "sys.exit(main(['snapshots', 's3://bucket/x']))"
    )
    cases: list[tuple[list[str], dict[str, str], int, list[str]]] = [
        (["snapshots", t.uri, "-o", f"endpoint_url={silent}", *creds], no_aws, 1, ["no answer from", silent]),
        (["describe", t.uri, *endpoint], no_aws, 1, ["credentials", "AWS_ACCESS_KEY_ID"]),
        (["describe", t.uri, *endpoint, "-o", "anon=false"], no_aws, 1, ["credentials"]),
        (["describe", t.uri, "-o", f"endpoint_url={closed}", *creds], no_aws, 1, ["cannot connect", closed]),
        (["snapshots", t.uri, *endpoint, *creds, "-o", "regoin=x"], no_aws, 2, ["'regoin'", "region_name"]),
        (["snapshots", t.uri, *endpoint, *creds, "-o", "max_concurency=2"], no_aws, 2, ["max_concurrency"]),
        (["snapshots", local, "-o", "regoin=x"], no_aws, 2, ["'regoin'"]),
        (["describe", "s3://"], no_aws, 2, ["bucket"]),
        (["describe", "s3a:///t", *endpoint, *creds], no_aws, 2, ["bucket"]),
        (["expire", local, "--older-than", "99999999999999999999d"], no_aws, 2, ["--older-than", "too long"]),
        (["files", local, "--snapshot", "0"], no_aws, 2, ["snapshot ids start at 1"]),
        (["files", local, "-o", 'x={"a": '], no_aws, 2, ["'x'", "JSON"]),
        (["-c", missing_s3fs], no_aws, 1, ["s3fs", "lakefmt[s3]"]),
        (["-c", missing_s3fs_snapshots], no_aws, 1, ["s3fs", "lakefmt[s3]"]),
    ]
    results = _timed_cli_many([(cmd, env) for cmd, env, _, _ in cases])
    silent_socket.close()
    for (cmd, _, code, words), (r, elapsed) in zip(cases, results, strict=True):
        err = _failed(r, code)
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("lakefmt"), err
        for word in words:
            assert word in err, (cmd, err)
        assert "Sup3rSecretValue" not in err and r.stdout == ""
        # a silent endpoint costs two attempts of the 5 s read timeout (it used to hold on for minutes)
        assert elapsed < (45 if f"endpoint_url={silent}" in cmd else 20), f"{cmd}: {elapsed:.1f} s"

    # the typed value reaches s3fs: anon=false signs with the environment's credentials, anon=true does not
    # sign (and this moto bucket refuses anonymous reads); the string "false" used to mean anonymous
    with_aws = {**no_aws, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    signed, typed_json, unsigned = _timed_cli_many(
        [
            (["describe", t.uri, *endpoint, "-o", "anon=false", "--json"], with_aws),
            (["describe", t.uri, *endpoint, *creds, "-o", 'config_kwargs={"read_timeout": 20}', "--json"], no_aws),
            (["describe", t.uri, *endpoint, "-o", "anon=true"], with_aws),
        ]
    )
    for r, elapsed in (signed, typed_json):
        assert _json(r)["latest_snapshot"] == 6 and elapsed < 20
    err = _failed(unsigned[0], 1)
    assert len(err.strip().splitlines()) == 1 and "Forbidden" in err and unsigned[1] < 20
    assert file_listing(t.io) == before


# -- inspection --------------------------------------------------------------------------------------------------


def test_snapshots_describe_files(cli_store: Any) -> None:
    t = _history(cli_store)
    uri, opts = t.uri, _opts(cli_store)
    commands = [
        ["snapshots", uri, "--json", *opts],
        ["describe", uri, "--json", *opts],
        ["files", uri, "--snapshot", "2", "--json", *opts],
        ["files", uri, "--json", *opts],
    ]
    text_forms = cli_store.kind == "local"  # on S3 each command costs ~2 s: the JSON forms suffice there
    if text_forms:
        commands += [[c for c in cmd if c != "--json"] for cmd in commands]
    else:
        commands.pop()
    results = _cli_many(commands)
    snaps_json, desc_json, files_old = results[:3]
    files_json = results[3] if text_forms else files_old
    snaps = t.snapshots()
    # snapshots
    rows = _json(snaps_json)
    assert [r["id"] for r in rows] == [s.id for s in snaps] == [1, 2, 3, 4, 5, 6]
    assert [r["commit_kind"] for r in rows] == ["APPEND", "APPEND", "OVERWRITE", "OVERWRITE", "APPEND", "APPEND"]
    assert [r["total_record_count"] for r in rows] == [s.total_record_count for s in snaps] == [3, 5, 4, 2, 3, 5]
    assert [r["time_millis"] for r in rows] == [s.time_millis for s in snaps]
    assert [r["time"] for r in rows] == [_iso(s.time_millis) for s in snaps]  # ISO-8601 beside the milliseconds
    assert list(rows[0])[list(rows[0]).index("time_millis") + 1] == "time"
    # describe
    info = _json(desc_json)
    live = t.files()
    assert info["uri"] == uri
    assert info["columns"] == {"id": "int64", "dt": "string"}
    assert info["fields"] == [
        {"name": "id", "type": "int64", "nullable": True},
        {"name": "dt", "type": "string", "nullable": True},
    ]
    assert info["partition_keys"] == ["dt"]
    assert info["latest_snapshot"] == 6
    assert info["latest_commit_millis"] == snaps[-1].time_millis
    assert info["latest_commit_time"] == _iso(snaps[-1].time_millis)
    assert info["rows"] == 5 == t.to_arrow().num_rows
    assert info["live_files"] == len(live)
    assert info["live_bytes"] == sum(f.file_size for f in live)
    assert info["format_version"] == 2  # a table without a key or deletion vectors
    # files
    if not text_forms:
        live = t.files(snapshot_id=2)
    entries = _json(files_json)
    assert sorted(e["path"] for e in entries) == sorted(f.path for f in live)
    by_path = {f.path: f for f in live}
    for e in entries:
        assert e["size"] == by_path[e["path"]].file_size
        assert e["rows"] == by_path[e["path"]].row_count
        assert e["partition"] == {"dt": e["path"].split("/", 1)[0].split("=", 1)[1]}
    assert sum(e["rows"] for e in entries) == 5
    old = _json(files_old)
    assert sorted(e["path"] for e in old) == sorted(f.path for f in t.files(snapshot_id=2))
    assert sum(e["rows"] for e in old) == 5
    if not text_forms:
        return
    snaps_text, desc_text, files_old_text, files_text = results[4:]
    lines = _ok(snaps_text).stdout.splitlines()
    assert lines[0].split()[:2] == ["id", "kind"] and "total_rows" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3", "4", "5", "6"]
    assert "OVERWRITE" in lines[3] and "UTC" in lines[3]
    text = _ok(desc_text).stdout
    assert uri in text and "latest_snapshot" in text and "id int64" in text and "dt string" in text
    text = _ok(files_text).stdout
    assert text.splitlines()[0].split() == ["path", "size", "rows", "partition"]
    assert all(f.path in text for f in live)
    assert all(e["path"] in _ok(files_old_text).stdout for e in old)


# -- maintenance -------------------------------------------------------------------------------------------------


def _check_report(report: dict[str, Any], operation: str, dry_run: bool) -> None:
    assert set(report) == REPORT_KEYS | (EXPIRE_KEYS if operation == "expire" else set())
    assert report["operation"] == operation and report["dry_run"] is dry_run
    assert set(report["files"]) == {k.value for k in FileClass}
    for v in report["files"].values():
        assert set(v) == {"count", "bytes"} and isinstance(v["count"], int) and isinstance(v["bytes"], int)
    assert report["total_files"] == sum(v["count"] for v in report["files"].values()) == len(report["paths"])
    assert report["total_bytes"] == sum(v["bytes"] for v in report["files"].values())
    assert all(isinstance(p, str) for p in report["paths"])


def test_expire_and_orphan_clean(cli_store: Any) -> None:
    t = _history(cli_store)
    expected = {s.id: sorted(t.to_arrow(snapshot_id=s.id).column("id").to_pylist()) for s in t.snapshots()}
    garbage = _garbage(t)
    uri, opts = t.uri, _opts(cli_store)
    before = file_listing(t.io)

    if cli_store.kind == "local":
        # dry runs, text and JSON, delete nothing and agree with each other
        dry_json, orphan_dry_json, dry_text, orphan_dry_text, orphan_young = _cli_many(
            [
                ["expire", uri, "--retain-max", "2", "--older-than", "7d", "--dry-run", "--json"],
                ["orphan-clean", uri, "--older-than", "0s", "--dry-run", "--json"],
                ["expire", uri, "--retain-max", "2", "--older-than", "7d", "--dry-run"],
                ["orphan-clean", uri, "--older-than", "0s", "--dry-run"],
                ["orphan-clean", uri, "--json"],  # default threshold: one day
            ]
        )
        assert file_listing(t.io) == before, "a dry run deleted something"
        plan = _json(dry_json)
        _check_report(plan, "expire", True)
        orphan_plan = _json(orphan_dry_json)
        _check_report(orphan_plan, "orphan-clean", True)
        text = _ok(dry_text).stdout
        assert "would expire snapshots 1..4 (4); would retain 5..6" in text and "would delete" in text
        assert all(p in text for p in plan["paths"])
        assert all(p in _ok(orphan_dry_text).stdout for p in garbage)
        young = _json(orphan_young)
        assert young["total_files"] == 0 and young["dry_run"] is False
    else:  # each command costs ~2 s on S3: the library's dry runs stand in for the command's
        plan = t.expire_snapshots(retain_max=2, older_than="7d", dry_run=True).to_dict()
        orphan_plan = t.remove_orphan_files(older_than=0, dry_run=True).to_dict()
    assert plan["expired_snapshots"] == [1, 2, 3, 4]
    assert plan["kept_snapshots"] == [5, 6]
    if cli_store.kind == "local":  # on S3 the library's report stands in for the command's
        assert plan["retained_snapshots"] == [5, 6]
    assert plan["files"]["snapshots"]["count"] == 4
    assert plan["files"]["data_files"]["count"] > 0
    assert set(plan["paths"]) <= set(before) and not set(plan["paths"]) & garbage
    for kind in ("snapshots", "manifest_lists", "data_files"):
        mine = [p for p in plan["paths"] if classify(p).value == kind]
        assert plan["files"][kind]["bytes"] == sum(before[p] for p in mine)
    assert set(orphan_plan["paths"]) == garbage
    assert orphan_plan["files"]["temp_files"]["count"] == 1
    assert orphan_plan["files"]["data_files"]["count"] == 1
    assert orphan_plan["files"]["manifests"]["count"] == 1

    # the real expire deletes exactly what the dry run listed
    report = _json(_cli("expire", uri, "--retain-max", "2", "--older-than", "7d", "--json", *opts))
    _check_report(report, "expire", False)
    same = set(plan) - {"dry_run"}  # on S3 the plan is the library's report, without retained_snapshots
    assert {k: report[k] for k in same} == {k: plan[k] for k in same}
    after = file_listing(t.io)
    assert set(before) - set(after) == set(plan["paths"])
    t = lakefmt.open_table(uri, cli_store.storage_options)
    for sid in (5, 6):
        assert sorted(t.to_arrow(snapshot_id=sid).column("id").to_pylist()) == expected[sid]

    # then the real orphan-clean, in text, deletes exactly the garbage
    text = _ok(_cli("orphan-clean", uri, "--older-than", "0s", *opts)).stdout
    assert f"deleted {len(garbage)} file(s)" in text and "deleted 1 temp file (" in text
    final = file_listing(t.io)
    assert set(after) - set(final) == garbage
    refs = referenced_files(MetaStore(t.io))
    assert set(final) - refs == set() and refs - set(final) <= {layout.LATEST, layout.EARLIEST}
    assert sorted(t.to_arrow().column("id").to_pylist()) == expected[6]
    assert [s.id for s in t.snapshots()] == [5, 6]
    if cli_store.kind == "local":
        again_json, expired_files = _cli_many(
            [["expire", uri, "--retain-max", "2", "--json"], ["files", uri, "--snapshot", "1"]]
        )
        again = _json(again_json)
        assert again["expired_snapshots"] == [] and again["total_files"] == 0
        assert "expired" in _failed(expired_files, 1)
        assert file_listing(t.io) == final


def test_expire_by_age_from_the_command_line(local_store: Any) -> None:
    """--older-than selects by commit time; --retain-min still keeps the newest ones."""
    t = _history(local_store)
    young, old_but_kept = _cli_many(
        [
            ["expire", t.uri, "--older-than", "1h", "--json"],
            ["expire", t.uri, "--older-than", "0s", "--retain-min", "4", "--dry-run", "--json"],
        ]
    )
    assert _json(young)["expired_snapshots"] == []
    assert _json(old_but_kept)["expired_snapshots"] == [1, 2]
    report = _json(_cli("expire", t.uri, "--older-than", "0s", "--retain-min", "3", "--json"))
    assert report["expired_snapshots"] == [1, 2, 3] and report["kept_snapshots"] == [4, 6]
    assert report["retained_snapshots"] == [4, 5, 6]  # the pair above is first and last, a list of 3
    assert [s.id for s in t.snapshots()] == [4, 5, 6]


# -- consumers ---------------------------------------------------------------------------------------------------


def test_consumers_list_hold_back_and_delete(cli_store: Any) -> None:
    t = create_table_in(cli_store, SCHEMA, options={"consumer.expiration-time": "1h", "compaction.auto": "false"})
    for i in range(6):
        t.append(pa.table({"id": [i], "dt": ["a"]}, schema=SCHEMA))
    t.set_consumer("silver", 3)
    lakefmt.Table(t.io, t._store, clock=lambda: time.time() - 7200).set_consumer("gone", 1)
    record = t.consumer("silver")
    assert record is not None
    uri, opts = t.uri, _opts(cli_store)
    if cli_store.kind == "s3":  # ~2 s a command on S3: the listing and one deletion
        listed = _cli("consumers", uri, "--json", *opts)
        deleted = _json(_cli("consumers", uri, "--delete", "silver", "--json", *opts))
        assert [(r["consumer"], r["next_snapshot"], r["expired"]) for r in _json(listed)] == [
            ("gone", 1, True),
            ("silver", 3, False),
        ]
        assert deleted == {
            "operation": "delete-consumer",
            "dry_run": False,
            "consumer": "silver",
            "record": {**record.to_dict(), "time": _iso(record.time_millis)},
            "error": None,
            "deleted": True,
        }
        assert [c.consumer_id for c in t.consumers()] == ["gone"]
        return
    before = file_listing(t.io)
    # read-only commands (and refusals) in one parallel batch
    text, as_json, expire_dry, expire_dry_text, delete_dry, help_text, unknown, bad_id, dry_alone = _cli_many(
        [
            ["consumers", uri],
            ["consumers", uri, "--json"],
            ["expire", uri, "--retain-max", "1", "--dry-run", "--json"],
            ["expire", uri, "--retain-max", "1", "--dry-run"],
            ["consumers", uri, "--delete", "silver", "--dry-run"],
            ["consumers", "--help"],
            ["consumers", uri, "--delete", "silvr"],
            ["consumers", uri, "--delete", "../x"],
            ["consumers", uri, "--dry-run"],
        ]
    )
    assert file_listing(t.io) == before, "a dry run or a refused command deleted something"
    lines = _ok(text).stdout.splitlines()
    assert lines[0].split() == ["consumer", "next_snapshot", "unread", "recorded", "recorded_ms", "expired"]
    gone, silver = (line.split() for line in lines[1:3])
    assert gone[0] == "gone" and gone[1:3] == ["1", "6"] and gone[-1] == "yes"
    assert silver[0] == "silver" and silver[1:3] == ["3", "4"] and silver[-1] == "no"
    assert "consumer.expiration-time = 1h" in lines[3]
    by_id = {r["consumer"]: r for r in _json(as_json)}
    assert set(by_id) == {"gone", "silver"}
    assert by_id["silver"]["recorded_ms"] == record.time_millis
    assert by_id["silver"]["recorded"] == (
        datetime.datetime.fromtimestamp(record.time_millis / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    )
    assert by_id["silver"]["expires"] is not None and by_id["silver"]["error"] is None
    assert (by_id["gone"]["expired"], by_id["silver"]["expired"]) == (True, False)
    assert by_id["silver"]["expires_ms"] == record.time_millis + 3600 * 1000
    assert by_id["silver"]["expires"] == _iso(by_id["silver"]["expires_ms"])

    plan = _json(expire_dry)
    _check_report(plan, "expire", True)
    assert plan["expired_snapshots"] == [1, 2] and plan["kept_snapshots"] == [3, 6]
    assert plan["retained_snapshots"] == [3, 4, 5, 6]
    assert plan["held_back"] == [{"kind": "consumer", "name": "silver", "snapshot_id": 3, "snapshots_held": 3}]
    assert plan["expired_consumers"] == ["gone"] and "consumer/consumer-gone" in plan["paths"]
    out = _ok(expire_dry_text).stdout
    assert "consumer 'silver' (from snapshot 3) would hold back 3 snapshots" in out
    assert "would expire snapshots 1..2 (2); would retain 3..6" in out
    assert "would delete the records of consumers past consumer.expiration-time: 'gone'" in out
    assert "would delete consumer 'silver' (next snapshot 3, recorded " in _ok(delete_dry).stdout
    # errors: one line each, usage errors exit 2, an unknown consumer exits 1
    assert "consumer.expiration-time" in _ok(help_text).stdout and "--delete silver-job --dry-run" in help_text.stdout
    assert "has no consumer 'silvr' (its consumers: gone, silver)" in _failed(unknown, 1)
    assert "consumer id '../x' is invalid" in _failed(bad_id, 2)
    assert "--dry-run goes with --delete" in _failed(dry_alone, 2)

    # an unreadable record is listed, then reported (exit 1); expire refuses and deletes nothing
    t.io.write("consumer/consumer-broken", b'{"version":1,')
    listed, refused = _cli_many([["consumers", uri], ["expire", uri, "--retain-max", "1"]])
    assert listed.returncode == 1 and "broken    unreadable" in listed.stdout and "silver" in listed.stdout
    assert "consumer/consumer-broken" in _failed(listed, 1) and "--delete" in listed.stderr
    assert "consumer/consumer-broken" in _failed(refused, 1) and len(refused.stderr.strip().splitlines()) == 1
    assert file_listing(t.io).keys() - before.keys() == {"consumer/consumer-broken"}
    t.delete_consumer("broken")

    # the real expire: holds, releases "gone", deletes its record; then the last consumer goes
    report = _json(_cli("expire", uri, "--retain-max", "1", "--json"))
    assert report["expired_snapshots"] == [1, 2] and report["expired_consumers"] == ["gone"]
    assert [c.consumer_id for c in t.consumers()] == ["silver"]
    deleted = _ok(_cli("consumers", uri, "--delete", "silver")).stdout
    assert "deleted consumer 'silver' (next snapshot 3, recorded " in deleted
    assert t.consumers() == []


def test_an_unknown_option_without_a_command_is_named() -> None:
    """Found: ``lakefmt --bogus`` said "the following arguments are required: COMMAND", not what was wrong. An
    unknown option given where the command should be is now named (exit 2); with nothing given, the command is
    still what is missing."""
    for argv, named in ((["--bogus"], "--bogus"), (["--bogus=1", "-x"], "--bogus=1 -x")):
        r = _cli(*argv)
        assert r.returncode == 2, r
        assert r.stderr == f"lakefmt: error: unrecognized arguments: {named} (see lakefmt --help)\n"
    r = _cli()
    assert r.returncode == 2 and "required: COMMAND" in r.stderr
