"""The pure data model and its codecs: types, schema, snapshot, partition folders, manifests, options."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import random
from typing import Any

import orjson
import pyarrow as pa
import pytest
import zstandard

from lakefmt.errors import (
    CorruptMetadataError,
    UnsupportedFormatVersionError,
    UnsupportedTypeError,
)
from lakefmt.options import InvalidOptionError, TableOptions
from lakefmt.spec import ColumnStats, CommitKind, DataFile, FileKind, ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.codec import FORMAT_VERSION, KIND_KEY, VERSION_KEY
from lakefmt.spec.manifest import decode_manifest, encode_manifest, entries_table, manifest_meta
from lakefmt.spec.manifest_list import decode_manifest_list, encode_manifest_list
from lakefmt.spec.partition import NULL_VALUE, partition_path, value_to_text
from lakefmt.spec.types import field_from_json, field_to_json, type_from_json, type_to_json
from lakefmt.units import parse_duration_ms, parse_size

# -- types ---------------------------------------------------------------------------------------------

ALL_TYPES = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(16),
    pa.date32(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    *[pa.timestamp(unit) for unit in ("s", "ms", "us", "ns")],
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us", tz="America/Los_Angeles"),
    pa.timestamp("ns", tz="+05:30"),
    pa.decimal32(7, 2),
    pa.decimal64(18, 4),
    pa.decimal128(38, 10),
    pa.decimal128(1, 0),
    pa.decimal256(76, 20),
    pa.list_(pa.int32()),
    pa.list_(pa.field("element", pa.string(), nullable=False)),
    pa.large_list(pa.float64()),
    pa.map_(pa.string(), pa.int64()),
    pa.map_(pa.string(), pa.int64(), keys_sorted=True),
    pa.map_(pa.field("k", pa.int32(), nullable=False), pa.field("v", pa.string(), nullable=False)),
    pa.struct([pa.field("a", pa.int8(), nullable=False), pa.field("b", pa.list_(pa.string()))]),
    pa.list_(pa.struct([("x", pa.map_(pa.string(), pa.list_(pa.timestamp("us", tz="UTC")))), ("y", pa.date32())])),
]


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_type_json_round_trip(t: pa.DataType) -> None:
    j = type_to_json(t)
    back = type_from_json(orjson.loads(orjson.dumps(j)))
    assert back == t
    assert str(back) == str(t)  # DataType equality ignores nested field names; str() does not
    assert type_to_json(back) == j


@pytest.mark.parametrize("nullable", [True, False])
def test_field_json_round_trip_keeps_nullability(nullable: bool) -> None:
    f = pa.field("weird name/=%é", pa.struct([pa.field("x", pa.int8(), nullable=not nullable)]), nullable=nullable)
    back = field_from_json(orjson.loads(orjson.dumps(field_to_json(f))))
    assert back.equals(f)
    assert back.type.field(0).nullable is (not nullable)


@pytest.mark.parametrize(
    ("t", "name"),
    [
        (pa.duration("s"), "duration"),
        (pa.date64(), "date64"),
        (pa.dictionary(pa.int8(), pa.string()), "dictionary"),
        (pa.string_view(), "string_view"),
        (pa.month_day_nano_interval(), "month_day_nano_interval"),
        (pa.struct([]), "struct<>"),  # Parquet cannot store a struct without fields
        (pa.list_(pa.struct([])), "struct<>"),
        (pa.map_(pa.string(), pa.duration("ms")), "duration"),
    ],
    ids=str,
)
def test_unsupported_types_are_refused_by_name(t: pa.DataType, name: str) -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        type_to_json(t)
    assert name in str(info.value)


@pytest.mark.parametrize(
    "j",
    [
        "int128",
        "",
        5,
        None,
        [],
        {"type": "nope"},
        {"no": "type"},
        {"type": "decimal"},
        {"type": "timestamp", "unit": "fortnight"},
        {"type": "list"},
        {"type": "list", "element": "int8"},
        {"type": "struct", "fields": [{"name": 1, "type": "int8"}]},
        {"type": "fixed_binary", "width": "x"},
        {"type": "decimal", "precision": 100, "scale": 2},
    ],
)
def test_malformed_type_json_is_corrupt_metadata(j: Any) -> None:
    with pytest.raises(CorruptMetadataError):
        type_from_json(j)


# -- schema --------------------------------------------------------------------------------------------


def _schema() -> TableSchema:
    arrow = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("dt", pa.string()),
            pa.field("n", pa.int32()),
            pa.field("tags", pa.map_(pa.string(), pa.list_(pa.int8()))),
        ]
    )
    return TableSchema(3, arrow, ("dt", "n"), {"manifest.merge-min-count": "5", "custom.key": "x"}, 1234)


def test_schema_json_round_trip() -> None:
    s = _schema()
    back = TableSchema.from_json(s.to_json())
    assert back.id == 3
    assert back.arrow_schema.equals(s.arrow_schema)
    assert [str(f.type) for f in back.arrow_schema] == [str(f.type) for f in s.arrow_schema]
    assert back.partition_keys == ("dt", "n")
    assert dict(back.options) == dict(s.options)
    assert back.time_millis == 1234
    assert back.partition_schema.names == ["dt", "n"]
    assert back.to_json() == s.to_json()


def test_schema_from_newer_version_is_refused() -> None:
    obj = orjson.loads(_schema().to_json())
    obj["version"] = FORMAT_VERSION + 1
    with pytest.raises(UnsupportedFormatVersionError, match=str(FORMAT_VERSION + 1)):
        TableSchema.from_json(orjson.dumps(obj))


@pytest.mark.parametrize(
    "key",
    [pa.field("f", pa.float64()), pa.field("l", pa.list_(pa.string())), pa.field("ts", pa.timestamp("us"))],
)
def test_schema_refuses_unsupported_partition_types(key: pa.Field) -> None:
    with pytest.raises(UnsupportedTypeError, match=key.name):
        TableSchema(0, pa.schema([key]), (key.name,))


def test_schema_refuses_unknown_partition_key_and_duplicates() -> None:
    with pytest.raises(UnsupportedTypeError, match="nope"):
        TableSchema(0, pa.schema([("a", pa.int8())]), ("nope",))
    with pytest.raises(UnsupportedTypeError, match="a"):
        TableSchema(0, pa.schema([("a", pa.int8()), ("a", pa.int16())]))
    with pytest.raises(UnsupportedTypeError, match="repeat"):
        TableSchema(0, pa.schema([("a", pa.int8())]), ("a", "a"))


# -- snapshot ------------------------------------------------------------------------------------------


def _snapshot(**overrides: Any) -> Snapshot:
    values: dict[str, Any] = {
        "id": 42,
        "schema_id": 1,
        "base_manifest_list": "manifest-list-abc-1",
        "base_manifest_list_size": 100,
        "delta_manifest_list": "manifest-list-abc-2",
        "delta_manifest_list_size": 200,
        "commit_user": "job-42",
        "commit_identifier": 7,
        "commit_kind": CommitKind.OVERWRITE,
        "time_millis": 1_700_000_000_000,
        "total_record_count": 1000,
        "delta_record_count": -10,
        "total_file_count": 12,
        "watermark": 1_699_999_999_000,
        "properties": {"spark.query": "q1"},
        "commit_users": {"job-42": (7, 1_700_000_000_000), "other": (3, 1_600_000_000_000)},
        "nonce": "n0nce",
    }
    values.update(overrides)
    return Snapshot(**values)


@pytest.mark.parametrize(
    "snap",
    [
        _snapshot(),
        _snapshot(watermark=None, properties={}, commit_users={}, commit_kind=CommitKind.APPEND),
        _snapshot(commit_kind=CommitKind.COMPACT, commit_identifier=-1),
    ],
)
def test_snapshot_json_round_trip(snap: Snapshot) -> None:
    back = Snapshot.from_json(snap.to_json())
    assert back == snap
    assert back.to_json() == snap.to_json()


def test_snapshot_json_uses_paimon_field_names() -> None:
    obj = orjson.loads(_snapshot().to_json())
    for key in (
        "version",
        "id",
        "schemaId",
        "baseManifestList",
        "deltaManifestList",
        "commitUser",
        "commitIdentifier",
        "commitKind",
        "timeMillis",
        "totalRecordCount",
        "deltaRecordCount",
    ):
        assert key in obj
    assert obj["commitKind"] == "OVERWRITE"


def test_snapshot_unknown_fields_are_ignored() -> None:
    obj = orjson.loads(_snapshot().to_json())
    obj["statistics"] = "stats-x"
    obj["indexManifest"] = None
    obj["someFutureThing"] = {"nested": [1, 2, {"x": True}]}
    assert Snapshot.from_json(orjson.dumps(obj)) == _snapshot()


def test_snapshot_changelog_fields_round_trip() -> None:
    snap = dataclasses.replace(
        _snapshot(), changelog_manifest_list="manifest-list-c", changelog_manifest_list_size=9, changelog_record_count=4
    )
    back = Snapshot.from_json(snap.to_json())
    assert back == snap and back.manifest_lists[-1] == "manifest-list-c" and len(_snapshot().manifest_lists) == 2
    obj = orjson.loads(snap.to_json())
    obj["changelogManifestList"] = 7
    with pytest.raises(CorruptMetadataError):
        Snapshot.from_json(orjson.dumps(obj))


def test_snapshot_optional_fields_may_be_absent() -> None:
    obj = orjson.loads(_snapshot().to_json())
    for key in ("watermark", "properties", "commitUsers", "nonce", "totalFileCount", "baseManifestListSize"):
        del obj[key]
    snap = Snapshot.from_json(orjson.dumps(obj))
    assert snap.watermark is None and snap.commit_users == {} and snap.properties == {}
    assert snap.id == 42


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99, 2**40])
def test_snapshot_from_newer_version_is_refused_naming_it(version: int) -> None:
    obj = orjson.loads(_snapshot().to_json())
    obj["version"] = version
    with pytest.raises(UnsupportedFormatVersionError, match=rf"\b{version}\b"):
        Snapshot.from_json(orjson.dumps(obj), what="snapshot file snapshot/snapshot-42")


@pytest.mark.parametrize("version", [0, -1, "1", None, True, 1.0, [1]])
def test_snapshot_with_invalid_version_is_corrupt(version: Any) -> None:
    obj = orjson.loads(_snapshot().to_json())
    obj["version"] = version
    with pytest.raises(CorruptMetadataError):
        Snapshot.from_json(orjson.dumps(obj))


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"[]", b"null", b"42", b'"snapshot"', b"\x00\x01\x02", b"\xff\xfe{}", b'{"version": 1}'],
)
def test_snapshot_corrupt_bytes(data: bytes) -> None:
    with pytest.raises(CorruptMetadataError, match="snapshot file snapshot/snapshot-9"):
        Snapshot.from_json(data, what="snapshot file snapshot/snapshot-9")


def test_snapshot_truncated_at_every_length_is_corrupt() -> None:
    data = _snapshot().to_json()
    for n in range(len(data) - 1):  # the last byte is a closing brace; dropping only whitespace is harmless
        if data[n:].strip() == b"":
            continue
        with pytest.raises(CorruptMetadataError):
            Snapshot.from_json(data[:n])


def _json_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _json_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _json_paths(v, (*prefix, i))
    return out


_ODD_VALUES: list[Any] = [None, True, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, "APPEND"]


@pytest.mark.parametrize("kind", ["snapshot", "schema"])
def test_mangled_json_fields_never_escape_as_foreign_errors(kind: str) -> None:
    """Replacing or deleting any field of a valid file either still parses or raises CorruptMetadataError /
    UnsupportedFormatVersionError: never a KeyError, AttributeError, ... from deep inside."""
    original = _snapshot().to_json() if kind == "snapshot" else _schema().to_json()
    decode = Snapshot.from_json if kind == "snapshot" else TableSchema.from_json
    base = orjson.loads(original)
    for path in _json_paths(base):
        for value in [*_ODD_VALUES, "<delete>"]:
            obj = orjson.loads(original)
            parent = obj
            for k in path[:-1]:
                parent = parent[k]
            if value == "<delete>":
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            with contextlib.suppress(CorruptMetadataError, UnsupportedFormatVersionError):
                decode(orjson.dumps(obj))


# -- partition folders ---------------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    "/",
    "..",
    ".",
    "...",
    "=",
    "%",
    "%2F",
    "%25",
    "a/b",
    "../../etc",
    "k=v",
    "é",
    "日本",
    "😀",
    " ",
    "\t",
    "\n",
    "\x00",
    "\\",
    "a\\..\\b",
    None,
    "",
    NULL_VALUE,
    "null",
    "__HIVE_DEFAULT_PARTITION__",
    "~",
    "x" * 1000,
    "é" * 500,
    "." * 300,
    "/" * 300,
    "x" * 199,
    "x" * 200,
    "x" * 201,
]


def _assert_safe_component(part: str) -> None:
    assert part, "empty component"
    assert part not in (".", "..")
    assert "/" not in part and "\\" not in part and "\x00" not in part
    assert part.isascii() and part.isprintable()
    assert len(part.encode()) <= 255  # every common filesystem's limit for one name


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: repr(v)[:20])
def test_partition_value_is_one_safe_component(value: Any) -> None:
    path = partition_path(["dt"], {"dt": value})
    _assert_safe_component(path)
    key, sep, text = path.partition("=")
    assert key == "dt" and sep == "="
    assert "=" not in text  # the first '=' separates the key from the value
    assert partition_path(["dt"], {"dt": value}) == path  # deterministic


def test_partition_values_give_distinct_folders() -> None:
    values = [*HOSTILE_VALUES, "x" * 1001, "x" * 999 + "y", "é" * 501, "%00", "%%", "%2E%2E", "%2e", "%2E"]
    assert len(set(values)) == len(values)
    paths = [partition_path(["dt"], {"dt": v}) for v in values]
    assert len(set(paths)) == len(values)


def test_partition_values_of_other_types() -> None:
    assert value_to_text(True) == "true" and value_to_text(False) == "false"
    assert value_to_text(-5) == "-5"
    assert value_to_text(datetime.date(2026, 11, 1)) == "2026-11-01"
    assert value_to_text(None) == NULL_VALUE
    assert value_to_text("") != value_to_text(None)


def test_multi_key_partition_path() -> None:
    keys = ["a/b", "..", "c"]
    path = partition_path(keys, {"a/b": "x/y", "..": "..", "c": None})
    parts = path.split("/")
    assert len(parts) == 3
    for part in parts:
        _assert_safe_component(part)


def test_random_unicode_partition_values_are_safe_and_injective() -> None:
    rng = random.Random(7)
    alphabet = "/.=%\\ \x00aZ9_-~é日😀\U0010ffff"
    seen: dict[str, str] = {}
    for _ in range(3000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        path = partition_path(["p"], {"p": value})
        _assert_safe_component(path)
        assert seen.setdefault(path, value) == value


# -- manifests and manifest lists ---------------------------------------------------------------------

TABLE = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("x", pa.float64()), ("tags", pa.list_(pa.string()))])


def _files(n: int = 4) -> list[DataFile]:
    out = []
    for i in range(n):
        dt = None if i == 3 else f"2026-11-0{i % 2 + 1}"
        out.append(
            DataFile(
                path=f"{partition_path(['dt'], {'dt': dt})}/data-w-{i}.parquet",
                file_size=1000 + i,
                row_count=10 * (i + 1),
                schema_id=0,
                partition={"dt": dt},
                stats={
                    "id": ColumnStats(-i, i * 100, i),
                    "dt": ColumnStats(dt, dt, 0 if dt else 10 * (i + 1)),
                    "x": ColumnStats(None, None, 0) if i == 2 else ColumnStats(-1.5, 2.5, 0),
                },
                creation_time_ms=1_700_000_000_000 + i,
            )
        )
    return out


def test_manifest_round_trip() -> None:
    entries = entries_table(FileKind.ADD, _files(), TABLE, ["dt"])
    back = decode_manifest(encode_manifest(entries))
    assert back.equals(entries)
    assert back.column("path").to_pylist() == [f.path for f in _files()]
    assert back.column("partition").to_pylist()[3] == {"dt": None}
    stats = back.column("stats").to_pylist()
    assert stats[1]["id"] == {"min": -1, "max": 100, "null_count": 1}
    assert stats[2]["x"] == {"min": None, "max": None, "null_count": 0}
    assert "tags" not in stats[0]  # no min/max for lists


def test_manifest_unpartitioned_and_delete_round_trip() -> None:
    files = [DataFile("data-1.parquet", 5, 1, 0, {}, {}, 0)]
    entries = entries_table(FileKind.DELETE, files, TABLE, [])
    back = decode_manifest(encode_manifest(entries))
    assert back.equals(entries)
    assert back.column("kind").to_pylist() == [int(FileKind.DELETE)]
    assert "partition" not in back.column_names


def test_manifest_meta_and_list_round_trip() -> None:
    entries = entries_table(FileKind.ADD, _files(), TABLE, ["dt"])
    data = encode_manifest(entries)
    meta = manifest_meta("manifest-w-0", len(data), entries, 0)
    assert meta.num_added_files == 4 and meta.num_deleted_files == 0
    assert meta.num_added_rows == 100 and meta.num_entries == 4
    assert meta.partition_stats["dt"] == ColumnStats("2026-11-01", "2026-11-02", 1)
    other = ManifestFileMeta("manifest-w-1", 10, 0, 2, 0, 30, 1, {"dt": ColumnStats(None, None, 2)})
    part_schema = pa.schema([("dt", pa.string())])
    assert decode_manifest_list(encode_manifest_list([meta, other], part_schema)) == [meta, other]
    assert decode_manifest_list(encode_manifest_list([], part_schema)) == []
    unpartitioned = ManifestFileMeta("manifest-w-2", 10, 3, 0, 3, 0, 0)
    assert decode_manifest_list(encode_manifest_list([unpartitioned], pa.schema([]))) == [unpartitioned]


def _manifest_bytes() -> bytes:
    return encode_manifest(entries_table(FileKind.ADD, _files(), TABLE, ["dt"]))


def _list_bytes() -> bytes:
    entries = entries_table(FileKind.ADD, _files(), TABLE, ["dt"])
    meta = manifest_meta("manifest-w-0", 1, entries, 0)
    return encode_manifest_list([meta, meta], pa.schema([("dt", pa.string())]))


CODECS = {"manifest": (_manifest_bytes, decode_manifest), "manifest-list": (_list_bytes, decode_manifest_list)}


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b"",
        lambda b: b[: len(b) // 2],
        lambda b: b[:-1],
        lambda b: b[:8],
        lambda b: b[1:],
        lambda b: b"\x00" * len(b),
        lambda b: b'{"version": 1}',
        lambda b: b[::-1],
        lambda b: b"ARROW1" + b"\xff" * 100 + b"ARROW1",
        lambda b: b + b"trailing",
        lambda b: b + b,
    ],
    ids=["empty", "half", "minus-one", "eight", "no-first-byte", "zeros", "json", "reversed", "fake-magic",
         "trailing-bytes", "two-frames"],
)
def test_corrupt_codec_bytes(codec: str, mangle: Any) -> None:
    make, decode = CODECS[codec]
    with pytest.raises(CorruptMetadataError, match="the/file/name"):
        decode(mangle(make()), what="the/file/name")


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_truncated_codec_bytes_at_every_length(codec: str) -> None:
    make, decode = CODECS[codec]
    data = make()
    for n in range(0, len(data), 7):
        with pytest.raises(CorruptMetadataError):
            decode(data[:n])


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_random_corruption_never_escapes_as_a_foreign_error(codec: str) -> None:
    """A flip must never surface as anything other than CorruptMetadataError (or a clean decode of valid
    arrays): no ArrowNotImplementedError, MemoryError, UnicodeDecodeError, and never a C++ abort in later use
    of the result. (The zstd checksum catches flips; this also guards the decoder behind it.)"""
    make, decode = CODECS[codec]
    data = make()
    rng = random.Random(codec)
    for trial in range(600):
        b = bytearray(data)
        if trial % 2:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        else:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        try:
            out = decode(bytes(b))
        except (CorruptMetadataError, UnsupportedFormatVersionError):
            continue
        if isinstance(out, pa.Table):
            out.validate(full=True)
            out.to_pylist()


def test_codec_refuses_wrong_kind() -> None:
    with pytest.raises(CorruptMetadataError, match="not a lakefmt manifest file"):
        decode_manifest(_list_bytes())
    with pytest.raises(CorruptMetadataError, match="not a lakefmt manifest-list file"):
        decode_manifest_list(_manifest_bytes())


def _open(data: bytes) -> pa.Table:
    """A metadata file's table, decoded with plain zstandard + pyarrow (what any user has)."""
    return pa.ipc.open_stream(zstandard.ZstdDecompressor().decompress(data)).read_all()


def _encode(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return zstandard.ZstdCompressor(write_checksum=True).compress(sink.getvalue())


def _reencode(data: bytes, meta_update: dict[bytes, bytes]) -> bytes:
    table = _open(data)
    meta = dict(table.schema.metadata or {})
    meta.update(meta_update)
    return _encode(table.replace_schema_metadata(meta))


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_codec_is_a_zstd_framed_arrow_stream(codec: str) -> None:
    make, decode = CODECS[codec]
    data = make()
    assert data[:4] == b"\x28\xb5\x2f\xfd"
    assert _open(data).schema.metadata[KIND_KEY] == codec.encode()
    # the encoding of lakefmt 0.1 development builds (an IPC file with zstd buffers) is not read
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, _open(data).schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(_open(data))
    with pytest.raises(CorruptMetadataError, match="not a lakefmt metadata file"):
        decode(bytes(sink.getvalue()))


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_codec_checksum_refuses_every_single_byte_flip(codec: str) -> None:
    """Every flip is refused, or lands on bits zstd ignores (the content decodes unchanged)."""
    make, decode = CODECS[codec]
    data = make()
    original = zstandard.ZstdDecompressor().decompress(data)
    unchanged = 0
    for i in range(len(data)):
        b = bytearray(data)
        b[i] ^= 0x5A
        try:
            decode(bytes(b))
        except CorruptMetadataError:
            continue
        assert zstandard.ZstdDecompressor().decompress(bytes(b)) == original, f"flip at byte {i} went unnoticed"
        unchanged += 1
    assert unchanged < len(data) // 50


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_codec_refuses_newer_version_naming_it(codec: str) -> None:
    make, decode = CODECS[codec]
    newer = _reencode(make(), {VERSION_KEY: str(FORMAT_VERSION + 5).encode()})
    with pytest.raises(UnsupportedFormatVersionError, match=str(FORMAT_VERSION + 5)):
        decode(newer)
    for bad in (b"", b"x", b"-1", b"0"):
        with pytest.raises(CorruptMetadataError):
            decode(_reencode(make(), {VERSION_KEY: bad}))


def test_manifest_missing_a_required_column_is_corrupt() -> None:
    table = _open(_manifest_bytes())
    renamed = table.rename_columns(["kind", "partition", "pbth", *table.column_names[3:]])
    renamed = renamed.replace_schema_metadata(table.schema.metadata)
    with pytest.raises(CorruptMetadataError, match="path"):
        decode_manifest(_encode(renamed))
    assert renamed.schema.metadata[KIND_KEY] == b"manifest"


# -- options -------------------------------------------------------------------------------------------


def test_options_parse_known_keys() -> None:
    opts = TableOptions.from_map(
        {
            "target-file-size": "64mb",
            "write.row-group-rows": "1000",
            "write.fsync": "FALSE",
            "file.compression": "Snappy",
            "manifest.merge-min-count": " 10 ",
            "commit.user-retention": "7d",
            "unknown.key": "kept but not interpreted",
        }
    )
    assert opts.target_file_size == 64 << 20
    assert opts.row_group_rows == 1000
    assert opts.fsync is False
    assert opts.compression == "snappy"
    assert opts.manifest_merge_min_count == 10
    assert opts.commit_user_retention_ms == 7 * 86_400_000
    assert TableOptions.from_map({}) == TableOptions()


def test_sync_ahead_bytes_defaults_to_16mib_and_0_turns_it_off() -> None:
    assert TableOptions().sync_ahead_bytes == 16 << 20
    assert TableOptions.from_map({"write.sync-ahead-bytes": "4mb"}).sync_ahead_bytes == 4 << 20
    assert TableOptions.from_map({"write.sync-ahead-bytes": "0"}).sync_ahead_bytes == 0
    with pytest.raises(InvalidOptionError, match=r"write\.sync-ahead-bytes"):
        TableOptions.from_map({"write.sync-ahead-bytes": "-1"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("512", 512), ("1b", 1), ("8kb", 8192), ("8K", 8192), ("2 MB", 2 << 20), ("1gib", 1 << 30)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("250ms", 250), ("90s", 90_000), ("30m", 1_800_000), ("2h", 7_200_000), ("1d", 86_400_000)]
)
def test_parse_duration(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("target-file-size", "big"),
        ("target-file-size", "-1mb"),
        ("target-file-size", "1.5mb"),
        ("target-file-size", "0"),
        ("write.row-group-rows", "ten"),
        ("write.row-group-rows", "0"),
        ("write.row-group-rows", "-5"),
        ("write.fsync", "yes"),
        ("file.compression", "zip"),
        ("manifest.merge-min-count", "1e3"),
        ("commit.max-retries", ""),
        ("commit.user-retention", "7 weeks"),
        ("commit.user-retention", "0"),
    ],
)
def test_bad_options_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(InvalidOptionError) as info:
        TableOptions.from_map({key: value})
    assert key in str(info.value)
    assert isinstance(info.value, ValueError)
