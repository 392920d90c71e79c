"""Requests per append commit, counted at a moto S3 server: few, and not growing with history."""

from __future__ import annotations

import statistics

import pyarrow as pa

import lakefmt
from benchmarks.s3_requests import BUCKET, RequestLog, counting_moto_server

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _batch(i: int) -> pa.Table:
    return pa.table({"id": [i, i + 1], "dt": ["2026-11-01", "2026-11-02"]}, schema=SCHEMA)


def test_append_requests_are_few_and_constant() -> None:
    log = RequestLog()
    with counting_moto_server(log) as options:
        uri = f"s3://{BUCKET}/t"
        # the commit protocol's own requests: no automatic maintenance (write-only) after the commits
        table = lakefmt.create_table(uri, SCHEMA, storage_options=options, options={"write-only": "true"})
        committer = table.new_committer("writer")
        warm: list[int] = []
        for i in range(45):
            with log.window() as requests:
                w = table.new_writer()
                w.write(_batch(i))
                assert committer.commit([w.prepare_commit()], identifier=i) is not None
            warm.append(len(requests))
            if i == 1:
                assert sorted(requests) == sorted(
                    [
                        ("PUT", "data"),
                        ("PUT", "manifest"),
                        ("GET", "hint"),
                        ("GET", "snapshot"),
                        ("PUT", "manifest-list"),
                        ("PUT", "manifest-list"),
                        ("PUT", "snapshot"),
                        ("PUT", "hint"),
                    ]
                ), requests
        cold: list[int] = []
        for i in range(45, 50):
            fresh = lakefmt.open_table(uri, storage_options=options)
            with log.window() as requests:
                w = fresh.new_writer()
                w.write(_batch(i))
                assert fresh.new_committer("writer").commit([w.prepare_commit()], identifier=i) is not None
            cold.append(len(requests))
        assert lakefmt.open_table(uri, storage_options=options).scan().count() == 100
    # a minor merge (one every ~15 commits here) reads nothing, since this process wrote every manifest it
    # merges: it only PUTs the merged manifest
    assert set(warm[1:]) <= {8, 9} and warm[1:].count(9) <= 3, warm
    # a fresh table object reads the latest snapshot (hint, snapshot, probe) and its two lists: 3 more
    assert statistics.median(cold) == 11, cold
