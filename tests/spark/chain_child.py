"""The streaming query of tests/spark/test_chain.py, run in a child process that the test SIGKILLs and restarts.

Usage: python chain_child.py BRONZE SILVER CHECKPOINT STARTED_MARKER MODE

Streams the lakefmt table BRONZE (``readStream.format("lakefmt")``, a few files per micro-batch, with a consumer
id) through a filter and a derived column (:data:`KEEP`, :data:`DERIVED`; the test computes the same with pyarrow)
into the lakefmt table SILVER, with the fixed CHECKPOINT; touches STARTED_MARKER once the query runs. MODE
``running``: a short processing-time trigger, until killed; ``available-now``: ``Trigger.AvailableNow``, exits 0
once everything BRONZE held at start is in SILVER. The commit user is the sink's default (from the checkpoint).
"""

from __future__ import annotations

import os
import sys
import time

KEEP = "id % 4 <> 1"  #: the filter
DERIVED = ("score", "id * 10 + part")  #: the derived column
CONSUMER_ID = "silver"
MAX_FILES_PER_TRIGGER = 6


def main() -> int:
    began = time.monotonic()
    bronze, silver, checkpoint, started, mode = sys.argv[1:6]
    # The test starts this process as a session leader: its group holds the JVM too. Spark's Python workers
    # read this to kill the group (pyspark's daemon moves them into a group of their own).
    os.environ["LAKEFMT_CRASH_PGID"] = str(os.getpgid(0))
    from pyspark.sql import functions as F
    from pyspark_lakefmt.session import local_session

    spark = local_session(
        "lakefmt-chain-test",
        {"spark.driver.memory": "768m", "spark.sql.streaming.stopTimeout": "10s"},
        java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    print(f"chain_child: session up after {time.monotonic() - began:.1f}s", flush=True)
    rows = (
        spark.readStream.format("lakefmt")
        .option("maxFilesPerTrigger", MAX_FILES_PER_TRIGGER)
        .option("consumerId", CONSUMER_ID)
        .load(bronze)
    )
    out = rows.where(KEEP).withColumn(DERIVED[0], F.expr(DERIVED[1]))
    writer = out.writeStream.format("lakefmt").option("checkpointLocation", checkpoint)
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="300 milliseconds")
    query = writer.start(silver)
    with open(started, "w") as f:
        f.write(str(os.getpid()))
    print(f"chain_child: query started after {time.monotonic() - began:.1f}s", flush=True)
    query.awaitTermination()
    print(f"chain_child: query done after {time.monotonic() - began:.1f}s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
