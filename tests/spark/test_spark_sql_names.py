"""What a new user types in Spark SQL against a SQL table over lakefmt (the shared ``local[2]`` session):

* read options in ``WITH (...)`` under every spelling: Spark hands a Python source the keys of ``WITH`` as written,
  quoted or not, and lakefmt matches them ignoring case; but Spark takes ``versionAsOf`` and ``timestampAsOf``
  (any case) for its own time travel, found by the session confs ``spark.sql.timeTravelVersionKey`` and
  ``spark.sql.timeTravelTimestampKey``, and fails (``UNSUPPORTED_FEATURE.TIME_TRAVEL``) before lakefmt is asked.
  ``pyspark_lakefmt.register`` points those confs elsewhere, so Delta's spellings reach lakefmt's read options;
* a SQL table's name given to a SQL function (``lakefmt_history('ev')``): the functions run in Python workers,
  which cannot look names up in Spark's catalog, so each says that it needs the location and how to get it
  (``pyspark_lakefmt.table_location``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
KEYS = ("spark.sql.timeTravelVersionKey", "spark.sql.timeTravelTimestampKey")


@pytest.fixture
def declared(spark: Any, tmp_path: Path) -> Iterator[tuple[lakefmt.Table, str]]:
    """A lakefmt table with two snapshots (ids ``[1]``, then ``[1, 2]``) declared as a SQL table of a fresh name;
    the session's time-travel confs are put back afterwards (the session is shared)."""
    t = lakefmt.create_table(str(tmp_path / "ev"), SCHEMA)
    t.append(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    t.append(pa.table({"id": [2], "dt": ["b"]}, schema=SCHEMA))
    name = f"ev_{uuid.uuid4().hex[:8]}"
    before = {key: spark.conf.get(key) for key in KEYS}
    spark.sql(f"CREATE TABLE {name} USING lakefmt LOCATION '{t.uri}'")
    yield t, name
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    for key, value in before.items():
        spark.conf.set(key, value)


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def error_text(action: Any) -> str:
    with pytest.raises(Exception) as exc:
        action()
    return " ".join(str(exc.value).split())


def test_every_spelling_of_a_read_option_reaches_lakefmt(spark: Any, declared: tuple[lakefmt.Table, str]) -> None:
    import pyspark_lakefmt

    t, name = declared
    first = t.snapshot(1)
    for key in KEYS:
        spark.conf.unset(key)  # Spark's defaults: versionAsOf, timestampAsOf
    # without register(): Spark's own time travel takes the option, and refuses a Python source
    text = error_text(lambda: spark.sql(f"SELECT * FROM {name} WITH ('versionAsOf' = '1')").collect())
    assert "UNSUPPORTED_FEATURE.TIME_TRAVEL" in text
    assert ids(spark.sql(f"SELECT * FROM {name} WITH ('snapshotId' = '1')")) == [1]

    pyspark_lakefmt.register(spark)
    assert [spark.conf.get(key) for key in KEYS] == [
        "lakefmt.spark-time-travel-off.version",
        "lakefmt.spark-time-travel-off.timestamp",
    ]
    spellings = [
        "'versionAsOf' = '1'",
        "'VERSIONASOF' = 1",
        "versionAsOf = 1",
        "'snapshotId' = '1'",
        "snapshotid = 1",
        f"'timestampAsOf' = '{first.time_millis}'",
        f"'asOf' = {first.time_millis}",
    ]
    for options in spellings:
        assert ids(spark.sql(f"SELECT * FROM {name} WITH ({options})")) == [1], options
    assert ids(spark.sql(f"SELECT * FROM {name}")) == [1, 2]
    assert ids(spark.read.option("versionAsOf", 1).table(name)) == [1]
    text = error_text(lambda: spark.sql(f"SELECT * FROM {name} WITH ('versionAsOf' = 'x')").collect())
    assert "option versionAsOf: 'x' is not a snapshot id" in text

    # a conf the user set is theirs: register() leaves it
    spark.conf.set(KEYS[0], "myVersionKey")
    pyspark_lakefmt.register(spark)
    assert spark.conf.get(KEYS[0]) == "myVersionKey"
    spark.conf.unset(KEYS[0])
    pyspark_lakefmt.register(spark, time_travel_options=False)
    assert spark.conf.get(KEYS[0]) == "versionAsOf"


def test_sql_functions_given_a_table_name_say_a_location_is_needed(
    spark: Any, declared: tuple[lakefmt.Table, str]
) -> None:
    import pyspark_lakefmt

    t, name = declared
    pyspark_lakefmt.register(spark)
    calls = [
        f"lakefmt_history('{name}')",
        f"lakefmt_snapshots('{name}')",
        f"lakefmt_files('{name}')",
        f"lakefmt_table_changes('{name}', 0)",
        f"lakefmt_compact('{name}')",
        f"lakefmt_expire('{name}')",
        f"lakefmt_restore('{name}', 1)",
        f"lakefmt_delete('{name}', 'id = 1')",
    ]
    for call in calls:
        text = error_text(lambda call=call: spark.sql(f"SELECT * FROM {call}").collect())
        assert f"NotATableError: {call}: '{name}' is not a lakefmt table's location" in text, text
        assert f"pyspark_lakefmt.table_location(spark, '{name}') returns it" in text, text
    assert len(t.snapshots()) == 2  # nothing ran

    location = pyspark_lakefmt.table_location(spark, name)
    assert lakefmt.open_table(location).uri == t.uri
    history = spark.sql(f"SELECT * FROM lakefmt_history('{location}')").collect()
    assert len(history) == 2

    spark.createDataFrame([(1,)], "id long").createOrReplaceTempView("not_lakefmt")
    with pytest.raises(lakefmt.InvalidLocationError, match="the SQL table not_lakefmt carries no lakefmt location"):
        pyspark_lakefmt.table_location(spark, "not_lakefmt")
    # a path that holds no table still says so, as before
    missing = str(Path(t.uri).parent / "missing")
    text = error_text(lambda: spark.sql(f"SELECT * FROM lakefmt_history('{missing}')").collect())
    assert f"NotATableError: lakefmt_history('{missing}'): {missing} is not a lakefmt table" in text
