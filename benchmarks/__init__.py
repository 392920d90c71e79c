"""lakefmt benchmarks: the metadata path (commit cost, planning, manifest merge) and the data path (write and
read overhead, the Spark streaming sink against Spark's parquet sink, the Spark streaming source against Spark's
file source, a lakefmt -> lakefmt streaming chain's latency against Spark's files -> parquet chain, a row-level
delete against pyarrow rewriting the same files, DuckDB and Polars over a scan against the same engine over the
files listed by hand, the change data feed of upserts against an incremental read of the same snapshots, Spark streaming
upserts into a key table against the append sink, the CPU of ``import lakefmt`` and ``lakefmt --help``),
each
measured side by side with its baseline in the same run. ``commit_speed`` also runs lakefmt's peers (pypaimon,
deltalake, pyiceberg) from virtualenvs of their own: ``bash tools/bench-setup.sh`` creates them (see
``benchmarks/peers``).

Run ``python -m benchmarks [--quick] [--only NAME] [--skip NAME] [--out DIR]``. Each benchmark writes one JSON file into
``benchmarks/results/`` (``<name>.json`` for the full mode, ``<name>-quick.json`` for ``--quick``) and the run
ends with a compact table of every comparison: value, baseline, ratio, target, and whether it was met.

The benchmarks use only lakefmt's public API and pyarrow, except where a benchmark measures one internal
component on purpose (the manifest merger, and the writer-side metadata used to build large tables without
writing their data files).
"""

BENCHMARKS = (
    "commit_scaling", "commit_speed", "s3_requests", "planning", "io_overhead", "manifest_merge", "spark_sink",
    "stream_source", "chain_latency", "delete_rows", "engines", "compaction", "compaction_stream", "delta_optimize",
    "schema_evolution", "key_tables", "merge", "change_feed", "auto_maintenance", "stream_upserts", "import_time",
    "spark_read",
)

__all__ = ["BENCHMARKS"]
