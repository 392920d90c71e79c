"""Schema evolution, the pure parts: field ids, schema files of both versions, the rules of changes, mapping
rows of an older schema by id, statistics by id, and write coercion."""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakefmt.errors import CorruptMetadataError, SchemaEvolutionError, SchemaMismatchError
from lakefmt.read.bounds import column_bounds
from lakefmt.read.evolve import evolve_batch, name_compatible, runs, source_columns
from lakefmt.spec import FileKind, TableSchema
from lakefmt.spec.evolution.changes import describe_changes, readable_under
from lakefmt.spec.evolution.editor import SchemaEditor
from lakefmt.spec.evolution.promotion import is_promotion
from lakefmt.spec.fields import FIELD_ID_KEY, annotate, assign_ids, flat_ids, make_nodes
from lakefmt.spec.manifest import ColumnStats, DataFile, entries_table
from lakefmt.write.conform import conform

INFO = pa.struct([("a", pa.int16()), ("b", pa.string())])
ARROW = pa.schema(
    [
        ("id", pa.int32()),
        ("info", INFO),
        ("tags", pa.list_(pa.field("item", pa.struct([("k", pa.string())])))),
        ("m", pa.map_(pa.string(), pa.int32())),
        ("dt", pa.string()),
    ]
)


def base(**kwargs: Any) -> TableSchema:
    return TableSchema(0, ARROW, ("dt",), **kwargs)


def _call(editor: SchemaEditor, change: tuple[Any, ...]) -> None:
    """``(method, *args)``, a trailing dict being keyword arguments."""
    name, *args = change
    kwargs = args.pop() if args and isinstance(args[-1], dict) else {}
    getattr(editor, name)(*args, **kwargs)


def edit(schema: TableSchema, *changes: tuple[Any, ...]) -> TableSchema:
    editor = SchemaEditor(schema)
    for change in changes:
        _call(editor, change)
    out = editor.result()
    assert out is not None
    return out


# -- field ids and schema files ---------------------------------------------------------------------------


def test_fresh_ids_go_to_a_structs_fields_first_then_their_children() -> None:
    nodes = assign_ids(list(ARROW))
    assert [n.id for n in nodes] == [1, 2, 3, 4, 5]  # the top level in column order: version 1's implied ids
    info, tags, m = nodes[1], nodes[2], nodes[3]
    assert [c.id for c in info.children] == [6, 7]
    assert tags.children[0].id == 8 and tags.children[0].children[0].id == 9
    assert [c.id for c in m.children] == [10, 11]
    assert flat_ids(nodes) == [1, 2, 6, 7, 3, 8, 9, 4, 10, 11, 5]  # stored in pre-order
    with pytest.raises(ValueError, match="fewer"):
        make_nodes(ARROW, [1, 2])


def test_data_files_carry_field_ids_at_every_depth(tmp_path: Any) -> None:
    schema = base()
    table = pa.table(
        {"id": [1], "info": [{"a": 1, "b": "x"}], "tags": [[{"k": "v"}]], "m": [[("k", 1)]], "dt": ["d"]},
        schema=schema.arrow_schema,
    )
    pq.write_table(table.cast(schema.id_schema), tmp_path / "f.parquet")
    written = pq.read_schema(tmp_path / "f.parquet")

    def ids(f: pa.Field) -> list[int]:
        out = [int(f.metadata[FIELD_ID_KEY])]
        t = f.type
        children = (
            [t.field(i) for i in range(t.num_fields)]
            if pa.types.is_struct(t)
            else [t.value_field]
            if pa.types.is_list(t)
            else [t.key_field, t.item_field]
            if pa.types.is_map(t)
            else []
        )
        return out + [i for c in children for i in ids(c)]

    assert [i for f in written for i in ids(f)] == list(schema.field_ids)
    assert annotate(schema.nodes).field("id").metadata == {FIELD_ID_KEY: b"1"}


def test_schema_files_round_trip_in_both_versions() -> None:
    v1 = base(format_version=1)
    text = v1.to_json()
    assert b'"id":1' not in text and b"highestFieldId" not in text and b'"version":1' in text  # as version 1 wrote
    assert TableSchema.from_json(text) == v1
    v2 = edit(v1, ("add_column", "country", pa.string()))
    back = TableSchema.from_json(v2.to_json())
    assert back == v2 and back.format_version == 2 and back.highest_field_id == 12
    assert back.column_ids["country"] == 12 and back.column_ids["id"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o["fields"][0].pop("id"), "malformed"),
        (lambda o: o["fields"][1].__setitem__("id", 1), "unique"),
        (lambda o: o.__setitem__("highestFieldId", 3), "highestFieldId"),
        (lambda o: o.pop("highestFieldId"), "malformed"),
        (lambda o: o["fields"][0].__setitem__("id", True), "malformed"),
    ],
)
def test_a_damaged_version_2_schema_file_is_corrupt(change: Any, message: str) -> None:
    import orjson

    obj = orjson.loads(base().to_json())
    change(obj)
    with pytest.raises(CorruptMetadataError, match=message):
        TableSchema.from_json(orjson.dumps(obj))


# -- the rules --------------------------------------------------------------------------------------------


def test_allowed_changes_keep_ids_and_never_reuse_one() -> None:
    s0 = base()
    s1 = edit(
        s0,
        ("rename_column", "id", "key"),
        ("add_column", ("info", "c"), pa.int64()),
        ("drop_column", ("info", "b")),
        ("update_column", "key", pa.int64()),
        ("add_column", "id", pa.string()),  # the name is free again: a new column
        ("move", "id", {"first": True}),
    )
    assert s1.id == 1 and s1.format_version == 2
    assert s1.column_ids["key"] == 1 and s1.column_ids["id"] == 13
    assert s1.arrow_schema.field("info").type == pa.struct([("a", pa.int16()), ("c", pa.int64())])
    assert s1.highest_field_id == 13
    s2 = edit(s1, ("drop_column", "id"), ("add_column", "id", pa.string()))
    assert s2.column_ids["id"] == 14  # never 13 again


def test_moves_and_nullability() -> None:
    s = TableSchema(0, pa.schema([pa.field("a", pa.int8(), nullable=False), ("b", pa.int8()), ("c", pa.int8())]))
    e = SchemaEditor(s)
    e.move("c", first=True)
    e.move("a", after="b")
    e.move("b", before="c")
    e.make_nullable("a")
    out = e.result()
    assert out is not None and out.arrow_schema.names == ["b", "c", "a"] and out.arrow_schema.field("a").nullable
    assert [n.id for n in out.nodes] == [2, 3, 1]


@pytest.mark.parametrize(
    ("src", "dst", "ok"),
    [
        (pa.int8(), pa.int16(), True),
        (pa.int8(), pa.int64(), True),
        (pa.int32(), pa.int64(), True),
        (pa.uint8(), pa.uint32(), True),
        (pa.int64(), pa.int32(), False),
        (pa.uint8(), pa.int16(), False),
        (pa.float32(), pa.float64(), True),
        (pa.float64(), pa.float32(), False),
        (pa.int32(), pa.float64(), False),
        (pa.decimal128(9, 2), pa.decimal128(12, 2), True),
        (pa.decimal128(9, 2), pa.decimal128(12, 3), False),
        (pa.decimal128(12, 2), pa.decimal128(9, 2), False),
        (pa.decimal128(9, 2), pa.decimal256(40, 2), True),
        (pa.string(), pa.large_string(), False),
    ],
)
def test_promotions(src: pa.DataType, dst: pa.DataType, ok: bool) -> None:
    assert is_promotion(src, dst) is ok


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("update_column", "id", pa.int16()), "only widening"),
        (("update_column", "id", pa.string()), "only widening"),
        (("update_column", "info", pa.struct([("a", pa.int32())])), "only widening"),
        (("update_column", "dt", pa.large_string()), "partition column 'dt'"),
        (("drop_column", "dt"), "partition column 'dt'"),
        (("rename_column", "dt", "day"), "partition column 'dt'"),
        (("rename_column", "id", "info"), "already has a column 'info'"),
        (("rename_column", ("info", "a"), "b"), "already has a column 'b'"),
        (("add_column", "id", pa.int64()), "already has a column 'id'"),
        (("add_column", ("info", "a"), pa.int64()), "already has a column 'a'"),
        (("add_column", ("id", "x"), pa.int64()), "not a struct"),
        (("add_column", "", pa.int64()), "non-empty"),
        (("add_column", "v", pa.string_view()), "not supported"),
        (("drop_column", "nope"), "no column 'nope'"),
        (("drop_column", ("info", "nope")), "no column 'nope'"),
        (("drop_column", ("tags", "item")), "element of a list"),
        (("rename_column", ("m", "key"), "k"), "element of a list"),
        (("make_nullable", ("m", "key")), "keys are never null"),
        (("move", "id", {"after": "nope"}), "no such column"),
        (("move", "id", {"before": "id"}), "the column itself"),
    ],
)
def test_refused_changes_say_why_and_change_nothing(change: tuple[Any, ...], message: str) -> None:
    editor = SchemaEditor(base())
    with pytest.raises(SchemaEvolutionError, match=message):
        _call(editor, change)
    assert editor.result() is None  # nothing recorded: no new schema


def test_the_last_column_and_a_structs_last_field_stay() -> None:
    one = TableSchema(0, pa.schema([("s", pa.struct([("a", pa.int8())]))]))
    editor = SchemaEditor(one)
    with pytest.raises(SchemaEvolutionError, match="only column"):
        editor.drop_column("s")
    with pytest.raises(SchemaEvolutionError, match="only field of its struct"):
        editor.drop_column(("s", "a"))


def test_union_by_name_adds_missing_columns_and_struct_fields_as_nullable() -> None:
    editor = SchemaEditor(base())
    editor.union_by_name(
        pa.schema(
            [
                pa.field("new", pa.int64(), nullable=False),
                ("info", pa.struct([("a", pa.int16()), ("z", pa.string())])),
                ("id", pa.int64()),  # a type difference is left to the write's coercion
            ]
        )
    )
    out = editor.result()
    assert out is not None
    assert out.arrow_schema.field("new").nullable and out.arrow_schema.field("id").type == pa.int32()
    assert out.arrow_schema.field("info").type.field("z").type == pa.string()


def test_readable_under_says_when_a_dropped_column_would_lose_values() -> None:
    s0 = base()
    added = edit(s0, ("add_column", "x", pa.int8()))
    renamed = edit(s0, ("rename_column", "id", "key"), ("update_column", "key", pa.int64()))
    dropped = edit(s0, ("drop_column", ("info", "b")))
    assert readable_under(s0, added) is None and readable_under(s0, renamed) is None
    reason = readable_under(s0, dropped)
    assert reason is not None and "'info.b' (field id 7)" in reason


def test_describe_changes_by_field_id() -> None:
    s0 = base(format_version=1)
    s1 = edit(
        s0,
        ("rename_column", "id", "key"),
        ("update_column", "key", pa.int64()),
        ("add_column", "s", pa.struct([("x", pa.int8())])),
        ("drop_column", "m"),
        ("move", "dt", {"first": True}),
    )
    assert describe_changes(None, s0) == ["created with 5 column(s)"]
    assert describe_changes(s0, s1) == [
        "upgraded to format version 2 (field ids assigned in column order)",
        "renamed 'id' to 'key' (field id 1)",
        "widened 'key' from int32 to int64 (field id 1)",
        "added 's' struct<x: int8> (field id 12)",
        "dropped 'm' (field id 4)",
        "reordered columns: 'dt', 'key', 'info', 'tags', 's'",
    ]


# -- reading rows of an older schema ----------------------------------------------------------------------


def test_rows_of_an_older_schema_are_mapped_by_id_at_every_depth() -> None:
    old = TableSchema(
        0,
        pa.schema(
            [
                ("a", pa.int32()),
                ("s", pa.struct([("x", pa.int8()), ("y", pa.string())])),
                ("l", pa.list_(pa.field("item", pa.struct([("p", pa.int8()), ("q", pa.int8())])))),
                ("m", pa.map_(pa.string(), pa.struct([("v", pa.float32())]))),
                ("gone", pa.string()),
            ]
        ),
    )
    new = edit(
        old,
        ("rename_column", "a", "b"),
        ("update_column", "b", pa.int64()),
        ("rename_column", ("s", "x"), "x2"),
        ("update_column", ("s", "x2"), pa.int32()),
        ("drop_column", ("s", "y")),
        ("add_column", ("s", "y"), pa.string()),  # same name, new id: old values must not show
        ("rename_column", ("l", "item", "p"), "p2"),
        ("drop_column", ("l", "item", "q")),
        ("update_column", ("m", "value", "v"), pa.float64()),
        ("drop_column", "gone"),
        ("add_column", "gone", pa.string()),
        ("move", "gone", {"first": True}),
    )
    rows = pa.table(
        {
            "a": pa.array([1, None, 3], pa.int32()),
            "s": [{"x": 1, "y": "old"}, None, {"x": 3, "y": "old"}],
            "l": [[{"p": 1, "q": 2}], None, []],
            "m": [[("k", {"v": 1.5})], None, [("j", None)]],
            "gone": ["g", "g", "g"],
        },
        schema=old.arrow_schema,
    ).slice(1)  # a slice: offsets into unsliced children must hold
    out = evolve_batch(rows, old, new, None)
    assert out.schema == new.arrow_schema
    assert out.to_pylist() == [
        {"gone": None, "b": None, "s": None, "l": None, "m": None},
        {"gone": None, "b": 3, "s": {"x2": 3, "y": None}, "l": [], "m": [("j", None)]},
    ]
    assert not name_compatible(old, new)
    assert source_columns(old, new, ["gone", "b"]) == ["a"]


def test_files_that_agree_by_name_stay_on_the_fast_path() -> None:
    s0 = base()
    assert name_compatible(s0, edit(s0, ("add_column", "x", pa.int8()), ("update_column", "id", pa.int64())))
    assert name_compatible(s0, edit(s0, ("add_column", ("info", "c"), pa.int8()), ("drop_column", "m")))
    assert not name_compatible(s0, edit(s0, ("rename_column", "id", "key")))
    assert not name_compatible(s0, edit(s0, ("drop_column", "m"), ("add_column", "m", pa.int8())))
    assert not name_compatible(s0, edit(s0, ("rename_column", ("info", "b"), "c")))
    assert not name_compatible(s0, edit(s0, ("add_column", ("tags", "item", "z"), pa.int8())))  # inside a list


def test_runs_keep_the_entries_order() -> None:
    s0 = base()
    s1 = edit(s0, ("rename_column", "id", "key"))
    entries = pa.table({"path": list("abcd"), "schema_id": [0, 0, 1, 0]})
    got = runs(entries, s1, {0: s0, 1: s1}.__getitem__)
    assert [(old.id if old else None, r.column("path").to_pylist()) for old, r in got] == [
        (0, ["a", "b"]),
        (None, ["c"]),
        (0, ["d"]),
    ]
    assert runs(entries.slice(2, 1), s1, None) == [(None, entries.slice(2, 1))]
    grouped = runs(entries, s1, {0: s0, 1: s1}.__getitem__, grouped=True)  # one read per way, fast one first
    assert [(old.id if old else None, r.column("path").to_pylist()) for old, r in grouped] == [
        (None, ["c"]),
        (0, ["a", "b", "d"]),
    ]


# -- statistics by field id -------------------------------------------------------------------------------


def _entries(schema: TableSchema, stats: dict[str, ColumnStats], rows: int = 10) -> pa.Table:
    f = DataFile("p", 1, rows, schema.id, {"dt": "d"}, stats, 0)
    return entries_table(FileKind.ADD, [f], schema.arrow_schema, schema.partition_keys, ids=schema.stats_ids)


def test_bounds_follow_the_field_id_not_the_name() -> None:
    s0 = TableSchema(0, pa.schema([("x", pa.int32()), ("y", pa.int64()), ("dt", pa.string())]), ("dt",))
    s1 = edit(s0, ("drop_column", "x"), ("add_column", "x", pa.int32()), ("rename_column", "y", "z"))
    old = _entries(s0, {"x": ColumnStats(1, 5, 0), "y": ColumnStats(10, 20, 0)})
    schemas = {0: s0, 1: s1}.__getitem__
    lo, hi, nulls = column_bounds(old, "z", s1, schemas)  # renamed: the old stats still hold
    assert (lo[0].as_py(), hi[0].as_py(), nulls[0].as_py()) == (10, 20, 0)
    lo, hi, nulls = column_bounds(old, "x", s1, schemas)  # the name is reused: the old x says nothing of it
    assert (lo[0].as_py(), hi[0].as_py(), nulls[0].as_py()) == (None, None, 10)  # the file predates it: all null
    lo, _, _ = column_bounds(old, "z", s1, None)  # without the old schema: unknown, never a wrong bound
    assert lo[0].as_py() is None


def test_bounds_of_a_widened_column_are_cast_and_mixed_schemas_keep_row_order() -> None:
    s0 = TableSchema(0, pa.schema([("n", pa.int32()), ("f", pa.float32())]), format_version=1)
    s1 = edit(s0, ("update_column", "n", pa.int64()), ("update_column", "f", pa.float64()))
    v1 = _entries(s0, {"n": ColumnStats(-(2**31), 2**31 - 1, 0), "f": ColumnStats(0.5, 1.5, 0)})
    assert "stats" in v1.column_names  # version 1 keys them by name
    v2 = _entries(s1, {"n": ColumnStats(2**40, 2**41, 0), "f": ColumnStats(2.5, 3.5, 1)})
    assert "field_stats" in v2.column_names
    mixed = pa.concat_tables([v2, v1, v2], promote_options="permissive")
    lo, hi, nulls = column_bounds(mixed, "n", s1, {0: s0, 1: s1}.__getitem__)
    assert lo.type == pa.int64() and lo.to_pylist() == [2**40, -(2**31), 2**40]
    assert hi.to_pylist() == [2**41, 2**31 - 1, 2**41]
    lo, _, nulls = column_bounds(mixed, "f", s1, {0: s0, 1: s1}.__getitem__)
    assert lo.to_pylist() == [2.5, 0.5, 2.5] and nulls.to_pylist() == [1, 0, 1]


# -- write coercion ---------------------------------------------------------------------------------------

TABLE = pa.schema(
    [("i", pa.int64()), ("s", pa.string()), ("f", pa.float64()), ("d", pa.decimal128(10, 2)), ("n", pa.int32())]
)


def _data(**cols: pa.Array) -> pa.Table:
    defaults: dict[str, pa.Array] = {
        "i": pa.array([1], pa.int64()),
        "s": pa.array(["a"]),
        "f": pa.array([1.0]),
        "d": pa.array([decimal.Decimal("1.00")], pa.decimal128(10, 2)),
        "n": pa.array([1], pa.int32()),
    }
    defaults.update(cols)
    return pa.table(defaults)


@pytest.mark.parametrize(
    "column",
    [
        {"i": pa.array([1], pa.int8())},
        {"i": pa.array([1], pa.uint32())},
        {"s": pa.array(["a"], pa.string_view())},
        {"s": pa.array(["a"], pa.large_string())},
        {"s": pa.array(["a", "b"]).dictionary_encode().slice(0, 1)},
        {"f": pa.array([1.0], pa.float32())},
        {"f": pa.array([3], pa.int64())},
        {"d": pa.array([decimal.Decimal("1.5")], pa.decimal128(4, 1))},
        {"n": pa.array([7], pa.int64())},  # fits: Arrow's safe cast accepts it
        {"n": pa.array([2.0])},
    ],
    ids=lambda c: f"{next(iter(c))}-{next(iter(c.values())).type}",
)
def test_safe_coercions_are_written(column: dict[str, pa.Array]) -> None:
    out = conform(_data(**column), TABLE)
    assert out.schema == TABLE
    name, arr = next(iter(column.items()))
    assert out.column(name).to_pylist() == pc.cast(arr, TABLE.field(name).type).to_pylist()


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ({"n": pa.array([2**40], pa.int64())}, "cannot hold"),
        ({"n": pa.array([1.5])}, "cannot hold"),
        ({"i": pa.array([2**63], pa.uint64())}, "cannot hold"),
        ({"d": pa.array([decimal.Decimal("1.234")], pa.decimal128(6, 3))}, "cannot hold"),
        ({"f": pa.array([decimal.Decimal("1.00")], pa.decimal128(10, 2))}, "the table expects double"),
        ({"i": pa.array(["1"])}, "the table expects int64"),
        ({"s": pa.array([1])}, "the table expects string"),
    ],
)
def test_unsafe_casts_stay_refused(column: dict[str, pa.Array], message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        conform(_data(**column), TABLE)


def test_a_narrower_float_column_takes_only_values_it_holds_exactly() -> None:
    table = pa.schema([("f", pa.float32()), ("s", pa.struct([("x", pa.float32())])), ("n", pa.int8())])
    ok = conform(
        pa.table({"f": [0.5, None, float("nan")], "s": [{"x": 1.0}, None, {"x": -2.0}], "n": [None] * 3}), table
    )
    assert ok.schema == table and ok.column("n").null_count == 3  # a column of nulls only: any nullable type
    for bad in ({"f": [0.5, 0.1, 1.0]}, {"s": [{"x": 0.5}, {"x": 0.1}, None]}):
        data = {
            "f": [1.0, 2.0, 3.0],
            "s": pa.array([None] * 3, table.field("s").type),
            "n": pa.array([1, 2, 3], pa.int8()),
        }
        data.update(bad)  # type: ignore[arg-type]
        with pytest.raises(SchemaMismatchError, match=r"1 value\(s\) would be rounded, such as 0.1"):
            conform(pa.table(data), table)
