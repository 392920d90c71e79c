"""Names of the files and folders of a table, relative to its root."""

from __future__ import annotations

import re

__all__ = [
    "CHANGELOG_DIR",
    "CONSUMER_DIR",
    "EARLIEST",
    "KEY_INDEX_SUFFIX",
    "LATEST",
    "MANIFEST_DIR",
    "SCHEMA_DIR",
    "SNAPSHOT_DIR",
    "TAG_DIR",
    "bucket_folder",
    "changelog_file_path",
    "consumer_path",
    "data_file_name",
    "data_path_of_key_index",
    "dv_file_name",
    "key_index_path",
    "manifest_list_path",
    "manifest_path",
    "parse_numbered",
    "pin_path",
    "schema_path",
    "snapshot_path",
    "tag_path",
]

SCHEMA_DIR = "schema"
SNAPSHOT_DIR = "snapshot"
MANIFEST_DIR = "manifest"
CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"
TAG_DIR = "tag"
CHANGELOG_DIR = "changelog"
TAG_PREFIX = "tag-"
PIN_PREFIX = "pin-"
LATEST = f"{SNAPSHOT_DIR}/LATEST"
EARLIEST = f"{SNAPSHOT_DIR}/EARLIEST"

_NUMBERED = re.compile(r"^(schema|snapshot)-(0|[1-9][0-9]*)$", re.ASCII)  # ASCII digits, no leading zero


def schema_path(schema_id: int) -> str:
    return f"{SCHEMA_DIR}/schema-{schema_id}"


def snapshot_path(snapshot_id: int) -> str:
    return f"{SNAPSHOT_DIR}/snapshot-{snapshot_id}"


def consumer_path(consumer_id: str) -> str:
    """``consumer/consumer-<id>`` (the id is checked by :func:`lakefmt.spec.consumer.check_consumer_id`)."""
    return f"{CONSUMER_DIR}/{CONSUMER_PREFIX}{consumer_id}"


def tag_path(name: str) -> str:
    """``tag/tag-<name>`` (the name is checked by :func:`lakefmt.spec.tag.check_tag_name`)."""
    return f"{TAG_DIR}/{TAG_PREFIX}{name}"


def pin_path(pin_id: str) -> str:
    """``tag/pin-<id>``: a short-lived tag a restore holds on its target while it commits (not a user's tag)."""
    return f"{TAG_DIR}/{PIN_PREFIX}{pin_id}"


def manifest_path(name: str) -> str:
    return f"{MANIFEST_DIR}/{name}"


def manifest_list_path(name: str) -> str:
    """Manifest lists live beside the manifests, in the manifest folder."""
    return manifest_path(name)


def manifest_name(writer_id: str, k: int) -> str:
    return f"manifest-{writer_id}-{k}"


def manifest_list_name(writer_id: str, k: int) -> str:
    return f"manifest-list-{writer_id}-{k}"


def data_file_name(writer_id: str, k: int) -> str:
    return f"data-{writer_id}-{k}.parquet"


def dv_file_name(writer_id: str, k: int) -> str:
    """A deletion-vector file (a Puffin file of one bucket's vectors), in its bucket's folder."""
    return f"dv-{writer_id}-{k}.puffin"


def changelog_file_path(writer_id: str, k: int) -> str:
    """A changelog file (``changelog-producer=lookup``: the change rows of one commit, in one Parquet file)."""
    return f"{CHANGELOG_DIR}/changelog-{writer_id}-{k}.parquet"


KEY_INDEX_SUFFIX = ".keyindex"


def key_index_path(data_path: str) -> str:
    """The key index file of a key table's data file (:mod:`lakefmt.spec.keys.index_file`): beside it, ``.parquet``
    replaced by ``.keyindex``."""
    stem = data_path[: -len(".parquet")] if data_path.endswith(".parquet") else data_path
    return stem + KEY_INDEX_SUFFIX


def data_path_of_key_index(path: str) -> str | None:
    """The data file a key index file belongs to, or None when ``path`` names no key index."""
    if not path.endswith(KEY_INDEX_SUFFIX):
        return None
    return path[: -len(KEY_INDEX_SUFFIX)] + ".parquet"


def bucket_folder(partition_folder: str, bucket: int) -> str:
    """A key table's bucket folder: ``<partition folders>/bucket-<n>`` (``bucket-<n>`` when unpartitioned)."""
    return f"{partition_folder}/bucket-{bucket}" if partition_folder else f"bucket-{bucket}"


def parse_numbered(name: str, prefix: str) -> int | None:
    """``snapshot-12`` -> 12 (for ``prefix='snapshot'``); None for any other name."""
    m = _NUMBERED.match(name)
    if m is None or m.group(1) != prefix:
        return None
    return int(m.group(2))
