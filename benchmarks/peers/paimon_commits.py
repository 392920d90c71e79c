"""Commit speed of pypaimon (Apache Paimon's pure-Python API): N append commits of R rows to a new local table.

Runs inside the pypaimon virtualenv made by ``tools/bench-setup.sh`` (stdlib, pyarrow, pypaimon and the sibling
``harness.py`` only; it must not import lakefmt or the benchmarks package):

    python paimon_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

A filesystem catalog whose warehouse is ``DIR`` holds the table ``bench.events`` (``DIR/bench.db/events``): an
append-only table (no primary key, so bucket -1: "bucket-unaware"), partitioned by ``dt`` when asked. One append
= one batch commit in the usual API: ``new_batch_write_builder()`` -> ``new_write().write_arrow(batch)`` ->
``prepare_commit()`` -> ``new_commit().commit(messages)``, the whole of it timed. Prints one JSON line last.

Metadata bytes: every file under the table folder except the data ``*.parquet`` files, i.e. ``snapshot/``
(snapshot-N, LATEST, EARLIEST), ``manifest/`` (Avro manifests and manifest lists) and ``schema/``.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

from harness import EVENTS_SCHEMA, parse_args, report, time_appends, tree_size


def main() -> int:
    args = parse_args("pypaimon")
    from pypaimon import CatalogFactory, Schema

    os.makedirs(args.root, exist_ok=False)
    catalog = CatalogFactory.create({"warehouse": args.root})
    catalog.create_database("bench", False)
    schema = Schema.from_pyarrow_schema(EVENTS_SCHEMA, partition_keys=["dt"] if args.partitioned else None)
    catalog.create_table("bench.events", schema, False)
    table = catalog.get_table("bench.events")

    def append(batch):  # one batch commit in pypaimon's usual API
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(batch)
        messages = write.prepare_commit()
        commit = builder.new_commit()
        commit.commit(messages)
        write.close()
        commit.close()

    commit_s = time_appends(append, args)
    read_builder = catalog.get_table("bench.events").new_read_builder()
    rows_read = read_builder.new_read().to_arrow(read_builder.new_scan().plan().splits()).num_rows
    notes = [
        "pure-Python pypaimon (the optional pypaimon_rust native writer is not installed)",
        "append-only table, bucket -1 (bucket-unaware); one batch write builder + one BatchTableCommit per append",
        "metadata = every file under the table folder except data *.parquet: snapshot/ (snapshot-N, LATEST), "
        "manifest/ (Avro manifests + manifest lists), schema/",
        "pypaimon's local FileIO issues no fsync; it publishes a snapshot by renaming a temp file after checking "
        "the name is free (a lock makes that atomic between threads of one process only)",
        "pypaimon never merges manifests or expires snapshots during commits (left to external maintenance)",
    ]
    metadata = tree_size(os.path.join(args.root, "bench.db", "events"), skip_suffix=".parquet")
    return report("pypaimon", version("pypaimon"), args, commit_s, rows_read=rows_read, metadata=metadata,
                  notes=notes)


if __name__ == "__main__":
    sys.exit(main())
