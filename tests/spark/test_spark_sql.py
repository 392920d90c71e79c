"""SQL tables over lakefmt against real Spark (the shared ``local[2]`` session), and one table under every
spelling of its location.

What Spark 4.3 lets a Python data source do with the session catalog (measured; ``docs/spark.md``, section SQL):
``CREATE TABLE t USING lakefmt LOCATION '...'`` calls ``schema()`` with ``path``/``location`` as ``file:/...``;
later ``SELECT``/``INSERT`` get no options at all, the reader the catalog's schema, the writer the query's. So
reads find the table through the schema lakefmt gave the catalog, writes must name it (``WITH ('path' = ...)``),
and a table declared with a column list, which lakefmt never sees, fails clearly at its first use.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark_lakefmt.options import TableRef

import lakefmt

FMT = "lakefmt"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])
OVERWRITE, APPEND = lakefmt.CommitKind.OVERWRITE, lakefmt.CommitKind.APPEND


@pytest.fixture
def sql_table(spark: Any) -> Iterator[Any]:
    """``sql_table(location)`` declares ``CREATE TABLE <fresh name> USING lakefmt LOCATION '<location>'`` and
    returns the name; every name it handed out is dropped afterwards (the session is shared)."""
    names: list[str] = []

    def declare(location: str | None = None, ddl: str = "") -> str:
        name = f"ev_{uuid.uuid4().hex[:8]}"
        names.append(name)
        spark.sql(f"CREATE TABLE {name} {ddl or 'USING lakefmt'}" + (f" LOCATION '{location}'" if location else ""))
        return name

    yield declare
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def events(root: Path, ids: list[int], dts: list[str]) -> lakefmt.Table:
    t = lakefmt.create_table(str(root), SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": ids, "dt": dts}, schema=SCHEMA))
    return t


def rows(df: Any) -> list[tuple[int, str]]:
    return sorted((r["id"], r["dt"]) for r in df.collect())


def lake_rows(t: lakefmt.Table) -> list[tuple[int, str]]:
    return sorted(zip(*t.to_arrow().select(["id", "dt"]).to_pydict().values(), strict=True))


def kinds(t: lakefmt.Table) -> list[lakefmt.CommitKind]:
    return [s.commit_kind for s in t.snapshots()]


def error_text(exc: pytest.ExceptionInfo[BaseException]) -> str:
    return " ".join(str(exc.value).split())  # Spark wraps the Python error over several lines


# -- CREATE TABLE over an existing table: SELECT, INSERT INTO, INSERT OVERWRITE ------------------------------
def test_sql_table_over_an_existing_table_reads_and_writes(spark: Any, sql_table: Any, tmp_path: Path) -> None:
    root = tmp_path / "ev"
    t = events(root, [1, 2], ["a", "b"])
    ev = sql_table(str(root))  # Spark hands the source LOCATION as file:/...

    assert rows(spark.sql(f"SELECT * FROM {ev}")) == [(1, "a"), (2, "b")]
    assert [f.name for f in spark.table(ev).schema] == ["id", "dt"]

    # writes name the table (Spark gives a Python source's writer no location): any spelling of it
    spark.sql(f"INSERT INTO {ev} WITH ('path' = 'file:{root}') VALUES (3, 'c'), (4, 'a')")
    assert kinds(t) == [APPEND, APPEND]
    assert lake_rows(t) == [(1, "a"), (2, "b"), (3, "c"), (4, "a")]

    spark.createDataFrame([(9, "z")], "id long, dt string").createOrReplaceTempView("staging")
    spark.sql(f"INSERT OVERWRITE {ev} WITH ('path' = 'file://{root}') SELECT * FROM staging")
    assert kinds(t) == [APPEND, APPEND, OVERWRITE]
    assert rows(spark.sql(f"SELECT * FROM {ev}")) == lake_rows(t) == [(9, "z")]

    # time travel in SQL: VERSION AS OF is refused by Spark for a Python source; the option is the way
    with pytest.raises(Exception, match="TIME_TRAVEL"):
        spark.sql(f"SELECT * FROM {ev} VERSION AS OF 1").collect()
    assert rows(spark.sql(f"SELECT * FROM {ev} WITH ('snapshotId' = '2')")) == [(1, "a"), (2, "b"), (3, "c"), (4, "a")]
    # Delta's spelling, WITH ('versionAsOf' = '2'), depends on the session's register() (test_spark_sql_names)

    # the PARTITION clause, static or dynamic, is refused by Spark before lakefmt is reached (a Python source
    # reports no partitioning), and so is the dynamic overwrite mode: none may replace the whole table
    for stmt in (
        f"INSERT OVERWRITE {ev} PARTITION (dt = 'z') SELECT 5L",
        f"INSERT OVERWRITE {ev} PARTITION (dt) SELECT 5L, 'z'",
        f"INSERT INTO {ev} PARTITION (dt = 'z') SELECT 5L",
    ):
        with pytest.raises(Exception, match="NON_PARTITION_COLUMN"):
            spark.sql(stmt)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        with pytest.raises(Exception, match="does not support dynamic overwrite"):
            spark.sql(f"INSERT OVERWRITE {ev} WITH ('path' = '{root}') SELECT 5L, 'y'")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert kinds(t) == [APPEND, APPEND, OVERWRITE] and lake_rows(t) == [(9, "z")]


def test_a_write_without_a_path_is_refused_and_never_reaches_another_table(
    spark: Any, sql_table: Any, tmp_path: Path
) -> None:
    """The writer gets the query's schema: in ``INSERT INTO a SELECT * FROM b`` it carries ``b``'s location, so a
    write that took its location from the schema would append ``b``'s rows to ``b``."""
    a, b = events(tmp_path / "a", [1], ["a"]), events(tmp_path / "b", [2], ["b"])
    sa, sb = sql_table(str(tmp_path / "a")), sql_table(str(tmp_path / "b"))
    for stmt in (
        f"INSERT INTO {sa} SELECT * FROM {sb}",
        f"INSERT OVERWRITE {sa} SELECT * FROM {sb}",
        f"INSERT INTO {sa} VALUES (3, 'c')",
    ):
        with pytest.raises(Exception) as exc:
            spark.sql(stmt)
        assert "INSERT INTO t WITH ('path' = 'uri')" in error_text(exc), stmt
    assert lake_rows(a) == [(1, "a")] and lake_rows(b) == [(2, "b")]
    assert len(a.snapshots()) == len(b.snapshots()) == 1
    spark.sql(f"INSERT INTO {sa} WITH ('path' = '{tmp_path / 'a'}') SELECT * FROM {sb}")
    assert lake_rows(a) == [(1, "a"), (2, "b")] and lake_rows(b) == [(2, "b")]


# -- declarations lakefmt cannot honour fail clearly, and never leave a table that "exists" empty ------------
def test_create_table_with_columns_fails_clearly_at_first_use(spark: Any, sql_table: Any, tmp_path: Path) -> None:
    """Spark calls nothing on a Python source for ``CREATE TABLE t (cols) USING ...``: no lakefmt table can be
    created then, and later reads and writes get no location. Each use says how to declare the table instead."""
    where = tmp_path / "ev4"
    ev4 = sql_table(str(where), ddl="(id BIGINT, dt STRING) USING lakefmt PARTITIONED BY (dt)")
    with pytest.raises(Exception) as exc:
        spark.sql(f"SELECT * FROM {ev4}").collect()
    text = error_text(exc)
    assert "InvalidLocationError" in text and "is never seen by lakefmt" in text
    assert "CREATE TABLE t USING lakefmt LOCATION 'uri'" in text and "lakefmt.create_table" in text
    with pytest.raises(Exception) as exc:
        spark.sql(f"INSERT INTO {ev4} VALUES (1, 'a')")
    assert "INSERT INTO t WITH ('path' = 'uri')" in error_text(exc)
    assert not where.exists()

    # the fix the message names: create the lakefmt table (partitioned), then declare it without columns
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, dt string").write.format(FMT).mode("append").option(
        "createTable", "true"
    ).option("partitionBy", "dt").save(str(where))
    ev = sql_table(str(where))
    assert rows(spark.table(ev)) == [(1, "a"), (2, "b")]
    assert lakefmt.open_table(str(where)).partition_keys == ("dt",)


def test_declarations_lakefmt_cannot_honour_are_refused(spark: Any, sql_table: Any, tmp_path: Path) -> None:
    # OPTIONS and TBLPROPERTIES reach the source at CREATE TABLE only, never its reads and writes
    root = tmp_path / "ev"
    events(root, [1], ["a"])
    for clause in ("TBLPROPERTIES ('snapshot.num-retained.max' = '5')", "OPTIONS (pushFilters 'true')"):
        with pytest.raises(Exception) as exc:
            sql_table(str(root), ddl=f"USING lakefmt {clause}")
        assert "takes no OPTIONS or TBLPROPERTIES" in error_text(exc), clause
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("ev_")]
    # no LOCATION: Spark's warehouse folder holds no lakefmt table; nothing is declared
    with pytest.raises(Exception) as exc:
        sql_table()
    assert "needs LOCATION 'uri' naming an existing lakefmt table" in error_text(exc)
    # a LOCATION that holds no table: the error names it
    empty = tmp_path / "nothing-here"
    with pytest.raises(Exception) as exc:
        sql_table(str(empty))
    assert f"{empty} is not a lakefmt table" in error_text(exc)
    # CREATE TABLE AS SELECT: the write gets no location; Spark then drops the declaration
    name = f"ctas_{uuid.uuid4().hex[:8]}"
    with pytest.raises(Exception) as exc:
        spark.sql(f"CREATE TABLE {name} USING lakefmt LOCATION '{tmp_path / 'ctas'}' AS SELECT 1L AS id")
    assert "gives a Python data source no location" in error_text(exc)
    assert not spark.catalog.tableExists(name)
    assert not (tmp_path / "ctas").exists()


def test_a_sql_table_out_of_step_with_its_table_is_a_clear_error(
    spark: Any, sql_table: Any, tmp_path: Path
) -> None:
    # ALTER TABLE changes Spark's catalog alone: the read says so, before any task
    events(tmp_path / "altered", [1], ["a"])
    altered = sql_table(str(tmp_path / "altered"))
    spark.sql(f"ALTER TABLE {altered} ADD COLUMNS (x INT)")
    with pytest.raises(Exception) as exc:
        spark.table(altered).collect()
    text = error_text(exc)
    assert "declares the columns ['id', 'dt', 'x'], but the lakefmt table has ['id', 'dt']" in text
    assert "ALTER TABLE does not reach lakefmt" in text
    # the table at the LOCATION is gone: the error names the location
    root = tmp_path / "ev"
    events(root, [1], ["a"])
    ev = sql_table(f"file://{root}")
    assert rows(spark.table(ev)) == [(1, "a")]
    shutil.rmtree(root)
    with pytest.raises(Exception) as exc:
        spark.table(ev).collect()
    text = error_text(exc)
    assert f"{root} is not a lakefmt table" in text and "the LOCATION of a SQL table" in text
    # DROP TABLE forgets the declaration only: the data of a table declared over a LOCATION stays
    events(root, [2], ["b"])
    spark.sql(f"DROP TABLE {ev}")
    assert lake_rows(lakefmt.open_table(str(root))) == [(2, "b")]


# -- one table under every spelling of its location ----------------------------------------------------------
def test_table_ref_normalizes_every_spelling_on_the_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    want = str(tmp_path / "ev")
    for path in (want, f"file:{want}", f"file://{want}", f"file://localhost{want}/", "ev", "./ev/"):
        assert TableRef.from_options({"path": path}).path == want, path
    assert TableRef.from_options({"path": "s3a://bucket/ev"}).path == "s3a://bucket/ev"
    with pytest.raises(lakefmt.InvalidLocationError, match="names the host"):
        TableRef.from_options({"path": "file://otherhost/ev"})


def test_dataframe_api_reads_one_table_under_every_spelling(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "ev"
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, dt string")
    df.write.format(FMT).mode("append").option("createTable", "true").save(f"file:{root}")
    df.write.format(FMT).mode("append").save(f"file://localhost{root}/")
    for uri in (str(root), f"file:{root}", f"file://{root}"):
        assert rows(spark.read.format(FMT).load(uri)) == [(1, "a"), (1, "a"), (2, "b"), (2, "b")], uri
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev"]
    assert lakefmt.open_table(f"file:{root}").uri == str(root)
