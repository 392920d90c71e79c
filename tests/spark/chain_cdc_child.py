"""The streaming query of tests/spark/test_chain_cdc.py, run in a child process that the test SIGKILLs and
restarts.

Usage: python chain_cdc_child.py BRONZE SILVER CHECKPOINT STARTED_MARKER MODE

Streams the change feed of the key table BRONZE (``readStream.format("lakefmt").option("readChangeFeed",
"true")``, with a consumer id) into the key table SILVER, whose ``rowkind.field`` is ``_change_type`` (Delta's
spelling) and ``sequence.field`` ``_commit_snapshot``: inserts and update post-images upsert, deletes delete,
pre-images are ignored, and of a key's changes in one micro-batch the latest snapshot's wins. The fixed
CHECKPOINT makes it exactly once; touches STARTED_MARKER once the query runs. MODE ``running``: a short
processing-time trigger, until killed; ``available-now``: ``Trigger.AvailableNow``, exits 0 once every change
BRONZE held at start is in SILVER.
"""

from __future__ import annotations

import os
import sys
import time

CONSUMER_ID = "silver"
COLUMNS = ("id", "v", "_change_type", "_commit_snapshot")  #: what the query writes: silver's columns


def main() -> int:
    began = time.monotonic()
    bronze, silver, checkpoint, started, mode = sys.argv[1:6]
    # the test starts this process as a session leader: its group holds the JVM too (see chain_child.py)
    os.environ["LAKEFMT_CRASH_PGID"] = str(os.getpgid(0))
    from pyspark_lakefmt.session import local_session

    spark = local_session(
        "lakefmt-chain-cdc-test",
        {"spark.driver.memory": "768m", "spark.sql.streaming.stopTimeout": "10s", "spark.sql.shuffle.partitions": "2"},
        java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    print(f"chain_cdc_child: session up after {time.monotonic() - began:.1f}s", flush=True)
    changes = (
        spark.readStream.format("lakefmt")
        .option("readChangeFeed", "true")
        .option("consumerId", CONSUMER_ID)
        .load(bronze)
    )
    writer = changes.select(*COLUMNS).writeStream.format("lakefmt").option("checkpointLocation", checkpoint)
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="300 milliseconds")
    query = writer.start(silver)
    with open(started, "w") as f:
        f.write(str(os.getpid()))
    print(f"chain_cdc_child: query started after {time.monotonic() - began:.1f}s", flush=True)
    query.awaitTermination()
    print(f"chain_cdc_child: query done after {time.monotonic() - began:.1f}s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
