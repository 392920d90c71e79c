"""Table option keys are a contract: an unknown key is refused where options are set (with the closest known key
suggested), except under ``user.``; a table whose stored options already hold unknown keys still opens, reads
and commits."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.spec import layout

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("snapshot.num-retained.maxx", "(did you mean snapshot.num-retained.max?)"),
        ("target-file-sise", "(did you mean target-file-size?)"),
        ("no-such-thing", ""),
        ("User.team", ""),  # the prefix is exact: no case games
    ],
)
def test_an_unknown_table_option_is_refused_and_nothing_is_created(tmp_path: Path, key: str, hint: str) -> None:
    uri = str(tmp_path / "t")
    with pytest.raises(lakefmt.UnknownOptionError) as info:
        lakefmt.create_table(uri, SCHEMA, options={key: "3"})
    message = str(info.value)
    assert message.startswith(f"unknown table option {key!r}{' ' + hint if hint else ''}. Known options: ")
    assert "snapshot.num-retained.max" in message and "keys under 'user.' are free for your own use" in message
    assert isinstance(info.value, lakefmt.InvalidOptionError)
    assert not Path(uri).exists() or not any(Path(uri).rglob("*"))


def test_user_keys_are_stored_and_never_interpreted(tmp_path: Path) -> None:
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA, options={"user.owner": "team-a", "commit.max-retries": "5"})
    assert lakefmt.open_table(t.uri).options == {"user.owner": "team-a", "commit.max-retries": "5"}


def test_a_table_whose_stored_options_hold_unknown_keys_still_works(tmp_path: Path) -> None:
    """Written by an older or other tool: never bricked by the stricter check."""
    t = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    path = tmp_path / "t" / layout.schema_path(0)
    doc = json.loads(path.read_bytes())
    doc["options"] = {"legacy.knob": "on", "target-file-sise": "1mb"}
    path.write_bytes(json.dumps(doc).encode())
    t = lakefmt.open_table(t.uri)
    assert t.options == {"legacy.knob": "on", "target-file-sise": "1mb"}
    t.append(pa.table({"id": [1, 2]}))
    t.overwrite(pa.table({"id": [3]}))
    assert t.to_arrow().column("id").to_pylist() == [3]
