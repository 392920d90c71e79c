"""MERGE from PySpark: ``pyspark_lakefmt.merge(spark, uri, source_df, predicate=..., source_alias=...,
target_alias=...)`` returns lakefmt's :class:`lakefmt.TableMerger`, the same builder as ``Table.merge``::

    (pyspark_lakefmt.merge(spark, "s3://bucket/users", updates_df, predicate="t.id = s.id",
                           source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute())

The source DataFrame is collected to Arrow on the driver (``DataFrame.toArrow()``) and merged there by lakefmt's
Python implementation (:mod:`lakefmt.rewrite.merge.run`), in one commit: this suits sources that fit in the driver's
memory (the changes of a batch, a day's updates); the target is read by the driver too, only its files that the
source's key ranges may match. A Python data source cannot take Spark SQL's ``MERGE INTO`` statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lakefmt

__all__ = ["merge"]


def merge(
    spark: Any,
    uri: str,
    source_df: Any,
    predicate: str,
    *,
    source_alias: str | None = None,
    target_alias: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> lakefmt.TableMerger:
    """A :class:`lakefmt.TableMerger` of ``source_df`` (a Spark DataFrame, collected to Arrow on the driver; any
    Arrow data is accepted too) into the table at ``uri``: add ``when_*`` clauses, then ``.execute()``, which
    returns a :class:`lakefmt.MergeReport`. ``spark``: the session (kept for symmetry with the other calls)."""
    del spark  # the merge runs on the driver
    table = lakefmt.open_table(uri, storage_options=dict(storage_options or {}))
    source = source_df.toArrow() if hasattr(source_df, "toArrow") else source_df
    return table.merge(source, predicate, source_alias=source_alias, target_alias=target_alias)
