"""Commit speed of deltalake (delta-rs's Python binding): N append commits of R rows to a new local table.

Runs inside the deltalake virtualenv made by ``tools/bench-setup.sh`` (stdlib, pyarrow, deltalake and the sibling
``harness.py`` only; it must not import lakefmt or the benchmarks package):

    python delta_commits.py --root DIR --commits N --rows R --partitioned 0|1 [--time-budget SECONDS]

``DeltaTable.create`` makes the table at ``DIR`` (partitioned by ``dt`` when asked; the timestamp-without-zone
column makes it protocol 3/7 with the timestampNtz feature), with default table properties: a checkpoint every
100 commits, no log clean-up within the 30-day retention. One append = one ``write_deltalake(table, batch,
mode="append")``, passed the one ``DeltaTable`` object kept across commits (it updates its state in place
after each commit, as a long-lived writer would; given a URI string instead, every append loads the table
state anew, a little slower over 300 commits here). Timed whole. Prints one JSON line last.

Metadata bytes: every file under ``DIR/_delta_log/`` (JSON commits, ``*.checkpoint.parquet`` checkpoints,
``_last_checkpoint``); data files are the ``*.parquet`` files outside ``_delta_log``.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

from harness import EVENTS_SCHEMA, parse_args, report, time_appends, tree_size


def main() -> int:
    args = parse_args("Delta")
    from deltalake import DeltaTable, write_deltalake

    os.makedirs(args.root, exist_ok=False)
    table = DeltaTable.create(args.root, EVENTS_SCHEMA, partition_by=["dt"] if args.partitioned else None)
    commit_s = time_appends(lambda batch: write_deltalake(table, batch, mode="append"), args)
    if table.version() != len(commit_s):
        print(f"table is at version {table.version()}, expected {len(commit_s)}", file=sys.stderr)
        return 1

    rows_read = DeltaTable(args.root).to_pyarrow_table().num_rows
    log = os.path.join(args.root, "_delta_log")
    checkpoints = sum(1 for n in os.listdir(log) if ".checkpoint." in n)
    notes = [
        "one write_deltalake(DeltaTable, batch, mode='append') per append, on one DeltaTable object kept open",
        "default table properties: checkpoint every 100 commits; expired-log clean-up never due in this run",
        f"metadata = every file under _delta_log/ (JSON commits, _last_checkpoint, checkpoints: {checkpoints})",
        "delta-rs's local object store issues no fsync; it publishes a log version by hard-linking a temp file "
        "to its name (fails if taken)",
    ]
    return report("deltalake", version("deltalake"), args, commit_s, rows_read=rows_read,
                  metadata=tree_size(log), notes=notes)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # delta-rs's runtime threads sometimes abort the interpreter's shutdown ("terminate called without an
    # active exception"), after the result is printed: leave without finalization.
    os._exit(code)
