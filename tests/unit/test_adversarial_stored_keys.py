"""Sparse (by page) lookups in key index files against a brute-force match, with small pages and many repeats."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from lakefmt.io import file_io_for
from lakefmt.rewrite.keys import stored as stored_keys
from lakefmt.spec import layout
from lakefmt.spec.keys import index_file as key_index

NAME = "data-test-0.parquet"  #: the data file every index here is written for


@pytest.mark.parametrize("seed", range(40))
def test_sparse_lookups_match_brute_force(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(key_index, "PAGE_ROWS", int(rng.integers(1, 9)))
    n = int(rng.integers(1, 300))
    span = int(rng.integers(1, 40))
    wide = bool(rng.integers(0, 2))
    keys = rng.integers(0, span, n).astype(np.int64) * ((1 << 40) if wide else 1)
    if rng.integers(0, 2):
        keys = np.sort(keys)
    io = file_io_for(f"memory://adv-stored-{uuid.uuid4().hex}")
    data_path = f"bucket-0/{NAME}"
    io.write(layout.key_index_path(data_path), key_index.encode_key_index(keys, data_file=NAME), sync=False)
    stored_keys.clear_stored()
    index = stored_keys.open_stored(io, data_path, n)
    assert index is not None and index.keys is None  # object storage: pages by range
    probes = np.sort(rng.choice(np.unique(keys), int(rng.integers(1, 3)), replace=True))
    got = stored_keys.stored_match(io, index, probes, np.arange(len(probes), dtype=np.int64))
    assert got is not None
    pos, rows = got
    want = {(int(p), int(r)) for r, v in enumerate(probes) for p in np.nonzero(keys == v)[0]}
    assert set(zip(pos.tolist(), rows.tolist(), strict=True)) == want
