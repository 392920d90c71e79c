"""S3 requests per append commit, counted at a moto S3 server on 127.0.0.1, as history grows.

One table on S3 (through s3fs) receives append commits of 1,000 rows, the way a streaming job writes: a task
writes one data file and its per-task manifest, then the driver commits with a stable commit user. At each
checkpoint (40, 1,000 and 10,000 snapshots; 40 and 200 in quick mode) the last 40 commits are counted request by
request on the server side, in two ways:

* **warm**: the same ``Table`` and ``Committer`` across commits (a PyArrow writer loop, a long-lived driver);
* **cold**: each commit opens the table anew and makes a new committer (a fresh driver-side process).

Each is reported as requests per append (data file + manifest + commit) and per commit alone, split by HTTP
method. Target: constant as history grows, and at most 8 per warm append.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lakefmt
from benchmarks.common import EVENTS_SCHEMA, Comparison, Result, events, median

NAME = "s3_requests"
TARGET = 8
COUNTED = {"warm": 30, "cold": 10}  # commits counted at each checkpoint
BUCKET = "lakefmt-bench"


class RequestLog:
    """Requests the moto server received: (method, kind) where kind is the key's folder in the table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []

    def record(self, method: str, path: str, query: str) -> None:
        key = path.split("/", 3)[-1] if path.count("/") >= 3 else ""
        kind = "list" if "list-type" in query or not key else _kind(key)
        with self._lock:
            self.requests.append((method, kind))

    @contextlib.contextmanager
    def window(self) -> Iterator[list[tuple[str, str]]]:
        """The requests made inside the block."""
        start = len(self.requests)
        out: list[tuple[str, str]] = []
        try:
            yield out
        finally:
            with self._lock:
                out.extend(self.requests[start:])


def _kind(key: str) -> str:
    name = key.rsplit("/", 1)[-1]
    if name.endswith(".parquet"):
        return "data"
    if name.startswith("manifest-list-"):
        return "manifest-list"
    if name.startswith("manifest-"):
        return "manifest"
    if name in ("LATEST", "EARLIEST"):
        return "hint"
    if name.startswith("snapshot-"):
        return "snapshot"
    if name.startswith("schema-"):
        return "schema"
    return "other"


@contextlib.contextmanager
def counting_moto_server(log: RequestLog) -> Iterator[dict[str, Any]]:
    """A moto S3 server on an ephemeral 127.0.0.1 port whose every request is recorded in ``log``.

    The server is moto's WSGI application, served the way ``moto.server.ThreadedMotoServer`` serves it, behind
    a small WSGI wrapper that records each request (nothing of moto is patched)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    moto_app = DomainDispatcherApplication(create_backend_app)

    def counting(environ: dict[str, Any], start_response: Any) -> Any:
        log.record(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", ""))
        return moto_app(environ, start_response)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(key, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = make_server("127.0.0.1", 0, counting, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = str(server.server_address[0]), server.server_address[1]
        options = {"key": "bench", "secret": "bench", "endpoint_url": f"http://{host}:{port}"}
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
        try:
            fs.mkdir(BUCKET)
        except FileExistsError:  # moto's backends are process-wide: an earlier server of this process made it
            left = fs.find(BUCKET)
            if left:
                fs.rm(left)
        yield options
    finally:
        server.shutdown()
        thread.join()


def run(quick: bool, workdir: Path) -> Result:
    # the counted commits end at each checkpoint (the first one: snapshots 1-40)
    checkpoints = [40, 200] if quick else [40, 1000, 10000]
    result = Result(NAME, "quick" if quick else "full",
                    {"checkpoints_snapshots": checkpoints, "counted_commits": COUNTED,
                     "rows_per_commit": 1000, "server": "moto (in-process, 127.0.0.1)", "client": "s3fs"})
    log = RequestLog()
    per_checkpoint: dict[str, Any] = {}
    with counting_moto_server(log) as options:
        uri = f"s3://{BUCKET}/requests"
        table = lakefmt.create_table(uri, EVENTS_SCHEMA, storage_options=options, options={"write-only": "true"})
        committer = table.new_committer("bench-s3-requests")
        ident = 0
        fill_s: list[float] = []

        def append(t: lakefmt.Table, c: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
            nonlocal ident
            with log.window() as total:
                writer = t.new_writer()
                writer.write(events(1000, first_id=ident * 1000))
                message = writer.prepare_commit()
                with log.window() as commit:
                    snap = c.commit([message], identifier=ident)
            if snap is None:
                raise RuntimeError(f"commit {ident} was skipped")
            ident += 1
            return total, commit

        for checkpoint in checkpoints:
            t0 = time.perf_counter()
            while ident < checkpoint - sum(COUNTED.values()):  # history up to the checkpoint, not counted
                append(table, committer)
            fill_s.append(time.perf_counter() - t0)
            counts: dict[str, Any] = {}
            for mode in ("warm", "cold"):
                totals, commits, by_kind = [], [], collections.Counter[str]()
                for _ in range(COUNTED[mode]):
                    if mode == "warm":
                        total, commit = append(table, committer)
                    else:
                        fresh = lakefmt.open_table(uri, storage_options=options)
                        total, commit = append(fresh, fresh.new_committer("bench-s3-requests"))
                    totals.append(len(total))
                    commits.append(len(commit))
                    by_kind.update(f"{m} {k}" for m, k in total)
                n = COUNTED[mode]
                counts[mode] = {
                    "per_append_median": median(totals), "per_append_mean": sum(totals) / n,
                    "per_append_max": max(totals),
                    "per_commit_median": median(commits), "per_commit_max": max(commits),
                    "per_append_by_request": {k: v / n for k, v in sorted(by_kind.items())},
                }
            per_checkpoint[str(ident)] = counts
            print(f"  [{NAME}] at {ident} snapshots: warm {counts['warm']['per_append_median']:g} per append "
                  f"({counts['warm']['per_commit_median']:g} in the commit), cold "
                  f"{counts['cold']['per_append_median']:g} ({counts['cold']['per_commit_median']:g})", flush=True)
            table = lakefmt.open_table(uri, storage_options=options)
            committer = table.new_committer("bench-s3-requests")

        if table.scan().count() != ident * 1000:
            raise RuntimeError("the table does not hold every row appended")

    (n0, first), (n1, last) = next(iter(per_checkpoint.items())), list(per_checkpoint.items())[-1]
    for mode in ("warm", "cold"):
        a0, a1 = first[mode]["per_append_median"], last[mode]["per_append_median"]
        result.comparisons.append(Comparison(
            f"{mode} requests per append at {n1} vs {n0} snapshots", a1, a0, "req",
            a1 / a0, 1.0, "ratio<=", note="constant as history grows"))
    warm = max(c["warm"]["per_append_median"] for c in per_checkpoint.values())
    result.comparisons.append(Comparison(
        f"warm requests per append (median; worst checkpoint) vs target {TARGET}", warm, TARGET, "req",
        warm / TARGET, 1.0, "ratio<=",
        note="commits that run a minor merge also read the small manifests they merge: see the mean"))
    warm_mean = max(c["warm"]["per_append_mean"] for c in per_checkpoint.values())
    result.comparisons.append(Comparison(
        f"warm requests per append (mean, merges included; worst checkpoint) vs target {TARGET}", warm_mean,
        TARGET, "req", warm_mean / TARGET))
    cold = max(c["cold"]["per_append_median"] for c in per_checkpoint.values())
    result.comparisons.append(Comparison(
        f"cold requests per append (median; worst checkpoint) vs target {TARGET}", cold, TARGET, "req",
        cold / TARGET, note="a fresh Table per commit reads the latest snapshot and its two manifest lists"))
    result.metrics = {"by_checkpoint": per_checkpoint, "history_fill_s": fill_s}
    return result
