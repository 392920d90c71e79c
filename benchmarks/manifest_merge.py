"""Manifest merge: M per-task manifests of E entries each (min/max/null counts on 3 columns) merged into
target-size manifests by ``ManifestMerger.merge_delta``, the committer's step (c).

The per-task manifests are made as writers make them (``DataFile`` -> ``entries_table`` ->
``encode_manifest``, written under the table's ``manifest/`` folder). Compared side by side, interleaved, best
of 5 (wall time; process CPU time is reported too):

* lakefmt: ``ManifestMerger(...).merge_delta(metas)`` with a fresh metadata store (nothing cached);
* the limit with the same I/O: read the same files, decode them with zstandard + pyarrow, concatenate,
  re-encode as zstd-framed Arrow IPC streams in slices of the same target size, write each with an fsync,
  as lakefmt does;
* the CPU limit: the same decode + concat + re-encode from and to memory (no file I/O).

The merger is an internal component: this benchmark uses ``lakefmt.commit.merge`` and ``lakefmt.meta.store``
directly because it measures exactly that step.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt
from benchmarks.common import (
    META_PARTITION_KEYS,
    META_SCHEMA,
    Comparison,
    Result,
    drop_tree,
    fake_data_files,
    interleaved,
    raw_decode,
    raw_encode,
)
from lakefmt.commit.merge import ManifestMerger, MergePolicy
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import FileKind, ManifestFileMeta, layout
from lakefmt.spec.manifest import encode_manifest, entries_table, manifest_meta

NAME = "manifest_merge"
TARGET_RATE = 500_000.0  # entries/s
TARGET_RATIO = 1.5  # lakefmt's time / the limit's time
REPS = 5
DAYS = 10


def _make_manifests(table: lakefmt.Table, m: int, e: int) -> list[ManifestFileMeta]:
    schema_id = table.table_schema().id
    stats_ids = table.table_schema().stats_ids  # field ids in format version 2, as the table's writers key them
    metas = []
    next_id = 0
    for task in range(m):
        writer_id = uuid.uuid4().hex
        files = fake_data_files(writer_id, e, task % DAYS, next_id, schema_id=schema_id)
        next_id += e * files[0].row_count
        entries = entries_table(FileKind.ADD, files, META_SCHEMA, META_PARTITION_KEYS, ids=stats_ids)
        data = encode_manifest(entries)
        name = layout.manifest_name(writer_id, 0)
        table.io.write(layout.manifest_path(name), data)
        metas.append(manifest_meta(name, len(data), entries, schema_id))
    return metas


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _raw_merge(inputs: list[bytes], target: int) -> list[bytes]:
    """decode + concat + re-encode in slices of about ``target`` bytes: the work of a merge, nothing else."""
    tables = [raw_decode(b) for b in inputs]
    entries = pa.concat_tables(tables).combine_chunks()
    per_entry = sum(len(b) for b in inputs) / max(entries.num_rows, 1)
    per_file = max(1, int(target / per_entry))
    return [raw_encode(entries.slice(i, per_file)) for i in range(0, entries.num_rows, per_file)]


def run_one(workdir: Path, m: int, e: int) -> dict[str, Any]:
    root = workdir / f"m{m}-e{e}"
    table = lakefmt.create_table(
        str(root / "table"), META_SCHEMA, partition_by=list(META_PARTITION_KEYS), options={"write-only": "true"}
    )
    t0 = time.perf_counter()
    metas = _make_manifests(table, m, e)
    gen_s = time.perf_counter() - t0
    schema = table.table_schema()
    policy = MergePolicy.from_options(TableOptions.from_map(schema.options))
    paths = [root / "table" / layout.manifest_path(x.file_name) for x in metas]
    in_memory = [p.read_bytes() for p in paths]
    input_bytes = sum(len(b) for b in in_memory)
    out: dict[str, Any] = {}

    def lakefmt_side(rep: int) -> None:
        merger = ManifestMerger(MetaStore(table.io), table.io, schema, policy, uuid.uuid4().hex)
        merged = merger.merge_delta(metas)
        out["lakefmt"] = {"files": len(merged), "bytes": sum(x.file_size for x in merged),
                          "entries": sum(x.num_entries for x in merged)}
        out["lakefmt_written"] = list(merger.written)

    def raw_io_side(rep: int) -> None:
        folder = root / f"raw-{rep}"
        folder.mkdir()
        inputs = []
        for p in paths:
            with open(p, "rb") as f:
                inputs.append(f.read())
        merged = _raw_merge(inputs, policy.target_size)
        for i, data in enumerate(merged):
            _write_synced(folder / f"merged-{i}", data)
        out["raw"] = {"files": len(merged), "bytes": sum(len(b) for b in merged)}

    def raw_cpu_side(rep: int) -> None:
        merged = _raw_merge(in_memory, policy.target_size)
        out["raw_cpu_files"] = len(merged)

    sides = {
        "lakefmt_merge_delta": lakefmt_side,
        "pyarrow_read_decode_concat_encode_write": raw_io_side,
        "pyarrow_decode_concat_encode_in_memory": raw_cpu_side,
    }

    def cleanup(side: str, rep: int) -> None:
        for written in out.pop("lakefmt_written", []):
            table.io.delete(layout.manifest_path(written))
        drop_tree(root / f"raw-{rep}")

    times = interleaved(sides, REPS, after=cleanup)
    if out["lakefmt"]["entries"] != m * e:
        raise RuntimeError(f"merge_delta produced {out['lakefmt']['entries']} entries, expected {m * e}")
    drop_tree(root)
    return {
        "manifests": m, "entries_per_manifest": e, "entries": m * e,
        "generate_s": gen_s, "input_bytes": input_bytes, "input_bytes_per_entry": input_bytes / (m * e),
        "target_size": policy.target_size,
        "output": {"lakefmt": out["lakefmt"], "pyarrow": out["raw"]},
        "runs": times,
        "best_s": {k: min(v["wall"]) for k, v in times.items()},
        "best_cpu_s": {k: min(v["cpu"]) for k, v in times.items()},
    }


def run(quick: bool, workdir: Path) -> Result:
    configs = [(100, 1000)] if quick else [(200, 1000), (1000, 1000), (100, 10_000)]
    result = Result(NAME, "quick" if quick else "full", {
        "configs": [{"manifests": m, "entries_per_manifest": e} for m, e in configs],
        "stats_columns": list(META_SCHEMA.names), "reps": REPS, "statistic": "best of reps",
    })
    for m, e in configs:
        r = run_one(workdir / NAME, m, e)
        best = r["best_s"]
        n = r["entries"]
        lf, io_, cpu = (best["lakefmt_merge_delta"], best["pyarrow_read_decode_concat_encode_write"],
                        best["pyarrow_decode_concat_encode_in_memory"])
        result.comparisons += [
            Comparison(f"merge_delta M={m} E={e}: rate", n / lf, n / io_, "entries/s", lf / io_,
                       TARGET_RATE, "value>="),
            Comparison(f"merge_delta M={m} E={e} vs pyarrow with same I/O (the limit)", lf, io_, "s", lf / io_,
                       TARGET_RATIO, "ratio<="),
            Comparison(f"merge_delta M={m} E={e} vs pyarrow in memory", lf, cpu, "s", lf / cpu),
        ]
        result.metrics[f"M{m}_E{e}"] = r
    result.notes.append(
        "Ratios are time ratios (lakefmt / baseline; 1.0 = at the limit). Targets: >= 500,000 entries/s and "
        "within 1.5x of the limit with the same I/O (read, decode, concatenate, re-encode, write + fsync)."
    )
    return result
