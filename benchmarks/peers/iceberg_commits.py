"""Commit speed of pyiceberg (Apache Iceberg's Python API): N append commits of R rows to a new local table.

Runs inside the pyiceberg virtualenv made by ``tools/bench-setup.sh`` (stdlib, pyarrow, pyiceberg and the sibling
``harness.py`` only; it must not import lakefmt or the benchmarks package):

    python iceberg_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

A ``SqlCatalog`` on the sqlite file ``DIR/catalog.db`` with the local warehouse ``DIR/warehouse`` holds the
table ``bench.events`` (``DIR/warehouse/bench/events``), created from the Arrow schema (format version 2,
default properties: fast appends, no manifest merging, old metadata.json files kept) and, when asked, given the
partition spec ``identity(dt)`` before the first append. One append = one ``table.append(batch)`` (write + a
snapshot commit through the catalog), timed whole. Stops early past ``--time-budget``: every pyiceberg append
writes a new metadata.json holding the whole snapshot history and a manifest list naming every manifest so far,
so its appends slow down as the table grows. Prints one JSON line last.

Metadata bytes: every file under the table's ``metadata/`` folder (``*.metadata.json`` versions, ``snap-*.avro``
manifest lists, ``*-m*.avro`` manifests); data files are under ``data/``. The sqlite catalog file is outside the
table and reported apart (``catalog_bytes``).
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

from harness import EVENTS_SCHEMA, parse_args, report, time_appends, tree_size


def main() -> int:
    args = parse_args("Iceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    root = os.path.abspath(args.root)
    os.makedirs(os.path.join(root, "warehouse"), exist_ok=False)
    catalog_db = os.path.join(root, "catalog.db")
    catalog = SqlCatalog("bench", uri=f"sqlite:///{catalog_db}", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace("bench")
    table = catalog.create_table("bench.events", schema=EVENTS_SCHEMA)
    if args.partitioned:
        with table.update_spec() as spec:
            spec.add_identity("dt")
    commit_s = time_appends(table.append, args)

    reloaded = catalog.load_table("bench.events")
    rows_read = reloaded.scan().to_arrow().num_rows
    table_dir = reloaded.location().removeprefix("file://")
    notes = [
        "one table.append(batch) per append on one Table object; SqlCatalog on sqlite, local warehouse",
        f"format version {reloaded.format_version}, default properties (fast append, no manifest merge, "
        "every metadata.json kept)",
        "metadata = every file under the table's metadata/ folder (metadata.json versions, manifest lists, "
        "manifests); the sqlite catalog (catalog_bytes) is not counted in it",
        "pyiceberg's local FileIO (pyarrow) issues no fsync for data or metadata files; the commit is a sqlite "
        "transaction on the catalog (sqlite fdatasyncs its journal and database file)",
    ]
    if args.partitioned:
        notes.append("partition spec identity(dt) set by update_spec() before the first append (one extra "
                     "metadata.json, not timed)")
    return report("pyiceberg", version("pyiceberg"), args, commit_s, rows_read=rows_read,
                  metadata=tree_size(os.path.join(table_dir, "metadata")), notes=notes,
                  catalog_bytes=os.path.getsize(catalog_db))


if __name__ == "__main__":
    sys.exit(main())
