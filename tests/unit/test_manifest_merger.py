"""Manifest merging on its own: the in-order bin packer, ADD/DELETE cancellation, and the merger's policy."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefmt.commit.merge import ManifestMerger, MergePolicy, cancel_pairs, pack, pick_tier
from lakefmt.io import file_io_for
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import ColumnStats, DataFile, FileKind, ManifestFileMeta, TableSchema, layout
from lakefmt.spec.manifest import encode_manifest, entries_table, manifest_meta

# -- pack ----------------------------------------------------------------------------------------------


def test_pack_empty() -> None:
    assert pack([], lambda x: x, 10) == []


def test_pack_examples() -> None:
    assert pack([1, 2, 3, 4, 5], lambda x: x, 5) == [[1, 2, 3], [4, 5]]
    assert pack([5, 5, 5], lambda x: x, 5) == [[5], [5], [5]]
    assert pack([100, 1, 1, 100], lambda x: x, 10) == [[100], [1, 1, 100]]
    assert pack([1, 1, 1], lambda x: x, 10) == [[1, 1, 1]]
    assert pack([0, 0, 0], lambda x: x, 1) == [[0, 0, 0]]


def test_pack_uses_the_size_function_and_keeps_objects() -> None:
    items = [{"n": "a", "s": 4}, {"n": "b", "s": 4}, {"n": "c", "s": 1}]
    bins = pack(items, lambda d: d["s"], 8)
    assert [[d["n"] for d in b] for b in bins] == [["a", "b"], ["c"]]
    assert bins[0][0] is items[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1000), max_size=60), st.integers(min_value=1, max_value=3000))
def test_pack_properties(sizes: list[int], target: int) -> None:
    items = list(enumerate(sizes))  # distinct objects, so order is checkable
    bins = pack(items, lambda it: it[1], target)
    assert [it for b in bins for it in b] == items  # order preserved, nothing lost or repeated
    assert all(b for b in bins)
    for i, b in enumerate(bins):
        total = sum(s for _, s in b)
        assert sum(s for _, s in b[:-1]) < target  # greedy: a bin closes as soon as it reaches the target
        if i < len(bins) - 1:
            assert total >= target  # only the last bin may be under the target
    # minimal number of bins for an in-order greedy packer: every closed bin holds >= target
    assert len(bins) <= sum(sizes) // target + 1


# -- cancel_pairs --------------------------------------------------------------------------------------

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _file(path: str, dt: str | None = "a", rows: int = 1) -> DataFile:
    return DataFile(path, 10, rows, 0, {"dt": dt}, {"id": ColumnStats(0, 1, 0)}, 0)


def _entries(kind: FileKind, paths: list[str]) -> pa.Table:
    return entries_table(kind, [_file(p) for p in paths], SCHEMA, ["dt"])


def _concat(*tables: pa.Table) -> pa.Table:
    return pa.concat_tables(tables)


def _kinds_and_paths(t: pa.Table) -> set[tuple[int, str]]:
    return set(zip(t.column("kind").to_pylist(), t.column("path").to_pylist(), strict=True))


def test_cancel_pairs_without_deletes_is_identity() -> None:
    e = _entries(FileKind.ADD, ["a", "b"])
    assert cancel_pairs(e).equals(e)


def test_cancel_pairs_drops_matched_pairs_only() -> None:
    e = _concat(_entries(FileKind.ADD, ["a", "b", "c"]), _entries(FileKind.DELETE, ["b", "z"]))
    out = cancel_pairs(e)
    assert _kinds_and_paths(out) == {(0, "a"), (0, "c"), (1, "z")}
    assert out.schema == e.schema
    # row data of the survivors is intact
    assert out.filter(pc.equal(out.column("path"), "a")).column("partition").to_pylist() == [{"dt": "a"}]


def test_cancel_pairs_delete_before_add_in_order() -> None:
    e = _concat(_entries(FileKind.DELETE, ["x"]), _entries(FileKind.ADD, ["x", "y"]))
    assert _kinds_and_paths(cancel_pairs(e)) == {(0, "y")}


def test_cancel_pairs_everything_cancels() -> None:
    e = _concat(_entries(FileKind.ADD, ["a", "b"]), _entries(FileKind.DELETE, ["b", "a"]))
    out = cancel_pairs(e)
    assert out.num_rows == 0
    assert out.schema == e.schema


def test_cancel_pairs_only_deletes() -> None:
    e = _entries(FileKind.DELETE, ["a", "b"])
    assert _kinds_and_paths(cancel_pairs(e)) == {(1, "a"), (1, "b")}


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10),
    st.lists(st.sampled_from("abcdefghijklmn"), unique=True, max_size=10),
    st.randoms(use_true_random=False),
)
def test_cancel_pairs_property(adds: list[str], dels: list[str], rnd: object) -> None:
    table = _concat(_entries(FileKind.ADD, adds), _entries(FileKind.DELETE, dels))
    order = list(range(table.num_rows))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    table = table.take(pa.array(order, pa.int64()))
    out = cancel_pairs(table)
    expected = {(0, p) for p in set(adds) - set(dels)} | {(1, p) for p in set(dels) - set(adds)}
    assert _kinds_and_paths(out) == expected
    assert out.num_rows == len(expected)


# -- the merger and its policy -------------------------------------------------------------------------


def test_policy_from_options() -> None:
    opts = TableOptions.from_map(
        {
            "manifest.target-file-size": "16kb",
            "manifest.merge-min-count": "3",
            "manifest.full-compaction-threshold": "7",
        }
    )
    assert MergePolicy.from_options(opts) == MergePolicy(16 << 10, 3, 7)
    assert MergePolicy.from_options(TableOptions()) == MergePolicy()


class _Env:
    """A memory FileIO with a merger over a two-column table partitioned by dt."""

    def __init__(self, policy: MergePolicy) -> None:
        self.io = file_io_for(f"memory://merge-{uuid.uuid4().hex}")
        self.store = MetaStore(self.io)
        self.schema = TableSchema(0, SCHEMA, ("dt",))
        self.merger = ManifestMerger(self.store, self.io, self.schema, policy, "test")
        self.n = 0

    def manifest(self, kind: FileKind, paths: list[str]) -> ManifestFileMeta:
        entries = entries_table(kind, [_file(p) for p in paths], SCHEMA, ["dt"])
        data = encode_manifest(entries)
        self.n += 1
        name = layout.manifest_name("w", self.n)
        self.io.write(layout.manifest_path(name), data)
        return manifest_meta(name, len(data), entries, 0)

    def live(self, metas: list[ManifestFileMeta]) -> set[str]:
        adds: set[str] = set()
        dels: set[str] = set()
        for m in metas:
            e = self.store.manifest(m.file_name)
            for kind, path in zip(e.column("kind").to_pylist(), e.column("path").to_pylist(), strict=True):
                (adds if kind == FileKind.ADD else dels).add(path)
        return adds - dels


def test_merge_delta_packs_small_manifests() -> None:
    env = _Env(MergePolicy(target_size=1 << 20, min_count=100, full_threshold=1000))
    metas = [env.manifest(FileKind.ADD, [f"f{i}"]) for i in range(20)]
    merged = env.merger.merge_delta(metas)
    assert len(merged) == 1
    assert merged[0].num_added_files == 20 and merged[0].num_added_rows == 20
    assert env.live(merged) == {f"f{i}" for i in range(20)}
    assert env.merger.merge_delta(metas[:1]) == metas[:1]  # a single manifest is left alone


def test_merge_base_waits_for_min_count_then_merges_and_cancels() -> None:
    env = _Env(MergePolicy(target_size=1 << 20, min_count=5, full_threshold=1000))
    metas = [env.manifest(FileKind.ADD, [f"f{i}"]) for i in range(4)]
    assert env.merger.merge_base(metas) == metas  # below min_count: untouched
    metas.append(env.manifest(FileKind.DELETE, ["f0", "f1"]))
    merged = env.merger.merge_base(metas)
    assert len(merged) == 1
    assert merged[0].num_deleted_files == 0  # ADD/DELETE pairs that met cancelled out
    assert env.live(merged) == {"f2", "f3"}


def test_merge_base_full_merge_when_deletes_pile_up() -> None:
    env = _Env(MergePolicy(target_size=1 << 20, min_count=1000, full_threshold=3))
    metas = [env.manifest(FileKind.ADD, [f"f{i}" for i in range(10)])]
    metas.append(env.manifest(FileKind.DELETE, ["f1", "f2"]))
    assert env.merger.merge_base(metas) == metas  # 2 deletes < threshold 3, 2 manifests < min_count
    metas.append(env.manifest(FileKind.DELETE, ["f3"]))
    merged = env.merger.merge_base(metas)
    assert sum(m.num_deleted_files for m in merged) == 0
    assert env.live(merged) == {f"f{i}" for i in range(10)} - {"f1", "f2", "f3"}


@pytest.mark.parametrize("target", [1, 4000, 1 << 20])
def test_merge_keeps_live_set_for_any_target(target: int) -> None:
    env = _Env(MergePolicy(target_size=target, min_count=2, full_threshold=5))
    metas: list[ManifestFileMeta] = []
    live: set[str] = set()
    for i in range(16):
        metas.append(env.manifest(FileKind.ADD, [f"a{i}", f"b{i}"]))
        live |= {f"a{i}", f"b{i}"}
        if i % 4 == 3:
            metas.append(env.manifest(FileKind.DELETE, [f"a{i - 1}"]))
            live.discard(f"a{i - 1}")
        metas = env.merger.merge_base(metas)
        assert env.live(metas) == live
        assert sum(m.num_added_files - m.num_deleted_files for m in metas) == len(live)


# -- size-tiered minor merge ---------------------------------------------------------------------------


def _meta(name: str, entries: int) -> ManifestFileMeta:
    return ManifestFileMeta(name, 1000 + entries, entries, 0, entries, 0, 0, {})


def test_pick_tier_takes_the_smallest_until_a_much_bigger_one() -> None:
    metas = [_meta("big", 300), *(_meta(f"s{i}", 1) for i in range(29)), _meta("mid", 30)]
    picked = pick_tier(metas, min_count=30)
    assert {m.file_name for m in picked} == {f"s{i}" for i in range(29)}  # 30 > 29: "mid" waits
    metas = [_meta("big", 1000), *(_meta(f"s{i}", 1) for i in range(10)), *(_meta(f"m{i}", 20) for i in range(19))]
    picked = pick_tier(metas, min_count=30)
    # 10 singles are fewer than half of min_count: the 20-entry ones join, then each fits under the sum
    assert {m.file_name for m in picked} == {f"s{i}" for i in range(10)} | {f"m{i}" for i in range(19)}
    assert pick_tier([_meta("a", 5), _meta("b", 1)], min_count=1) == [_meta("b", 1), _meta("a", 5)]


def test_minor_merges_rewrite_each_entry_about_log_times() -> None:
    """1 entry per commit for 600 commits: merging every small manifest (Paimon's rule) would rewrite
    sum(30k for k <= 20) = 6,300 entries; tiers rewrite each entry a few times."""
    env = _Env(MergePolicy(target_size=1 << 30, min_count=30, full_threshold=1000))
    base: list[ManifestFileMeta] = []
    rewritten = 0
    for i in range(600):
        before = {m.file_name for m in base}
        base = env.merger.merge_base([*base, env.manifest(FileKind.ADD, [f"f{i}"])])
        rewritten += sum(m.num_added_files for m in base if m.file_name not in before and m.file_name.startswith(
            "manifest-test-"))
        assert len(base) < 30 + 1
    assert env.live(base) == {f"f{i}" for i in range(600)}
    assert rewritten < 3 * 600, rewritten
