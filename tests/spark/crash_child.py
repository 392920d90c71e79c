"""The streaming query of tests/spark/test_crash.py, run in a child process that the test SIGKILLs and restarts.

Usage: python crash_child.py INPUT_DIR TABLE CHECKPOINT STARTED_MARKER [--country]

Reads the Parquet files in INPUT_DIR as a stream (one file per micro-batch, ``availableNow``) and appends them to
the lakefmt table TABLE, with the fixed CHECKPOINT; touches STARTED_MARKER once the query runs; exits 0 when
every file present at start has been committed. The commit user is the sink's default (from the checkpoint).
``--country``: the query (new code restarted from the same checkpoint) brings a new column, ``country`` =
``'c' + id % 2``, with ``mergeSchema``: the sink adds it to the table's schema before the first micro-batch.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    began = time.monotonic()
    input_dir, table, checkpoint, started = sys.argv[1:5]
    country = "--country" in sys.argv[5:]
    # The test starts this process as a session leader: its group holds the JVM too. Spark's Python workers
    # read this to kill the group (pyspark's daemon moves them into a group of their own).
    os.environ["LAKEFMT_CRASH_PGID"] = str(os.getpgid(0))
    from pyspark_lakefmt.session import local_session

    spark = local_session(
        "lakefmt-crash-test",
        {"spark.driver.memory": "768m", "spark.sql.streaming.stopTimeout": "10s"},
        java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    print(f"crash_child: session up after {time.monotonic() - began:.1f}s", flush=True)
    stream = (
        spark.readStream.schema("id BIGINT, part INT, payload STRING")
        .option("maxFilesPerTrigger", 1)
        .parquet(input_dir)
    )
    if country:
        from pyspark.sql import functions as F

        stream = stream.withColumn("country", F.concat(F.lit("c"), (F.col("id") % 2).cast("string")))
    writer = stream.writeStream.format("lakefmt").option("checkpointLocation", checkpoint)
    if country:
        writer = writer.option("mergeSchema", "true")
    query = writer.trigger(availableNow=True).start(table)
    with open(started, "w") as f:
        f.write(str(os.getpid()))
    print(f"crash_child: query started after {time.monotonic() - began:.1f}s", flush=True)
    query.awaitTermination()
    print(f"crash_child: query done after {time.monotonic() - began:.1f}s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
