"""The ``lakefmt`` commands as a table: each subcommand's name, the function that runs it (imported on first
use from the command modules: thin, over the public API), its help texts and its arguments. The parser is built
from it, and commands run, in :mod:`lakefmt.cli.main`."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import lakefmt
from lakefmt.units import DEFAULT_ORPHAN_OLDER_THAN, DEFAULT_ORPHAN_OLDER_THAN_MS, format_duration_ms

__all__ = ["COMMANDS", "COMMON_ARGS", "EPILOG", "Arg", "Command"]


def _lazy(target: str) -> Callable[..., Any]:
    """The function ``module:name``, imported when first called: building the parser (``lakefmt --help``) imports
    none of the command modules, which import readers, writers and storage clients."""
    module, name = target.split(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(f"lakefmt.cli.{module}"), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name  # argparse names a type by it: "invalid positive value: 'x'"
    return call


cmd_changes, start_id = _lazy("changes:cmd_changes"), _lazy("changes:start_id")
cmd_compact, parse_partition = _lazy("compact:cmd_compact"), _lazy("compact:parse_partition")
parse_sort_by, parse_target_size = _lazy("compact:parse_sort_by"), _lazy("compact:parse_target_size")
cmd_describe, cmd_files = _lazy("inspect:cmd_describe"), _lazy("inspect:cmd_files")
cmd_history, cmd_snapshots = _lazy("inspect:cmd_history"), _lazy("inspect:cmd_snapshots")
cmd_consumers, cmd_expire = _lazy("maintain:cmd_consumers"), _lazy("maintain:cmd_expire")
cmd_orphan_clean, consumer_id = _lazy("maintain:cmd_orphan_clean"), _lazy("maintain:consumer_id")
duration, positive = _lazy("maintain:duration"), _lazy("maintain:positive")
positive_duration, snapshot_id = _lazy("maintain:positive_duration"), _lazy("maintain:snapshot_id")
cmd_schema, cmd_upgrade = _lazy("schema:cmd_schema"), _lazy("schema:cmd_upgrade")
cmd_restore, cmd_tag_create = _lazy("versions:cmd_restore"), _lazy("versions:cmd_tag_create")
cmd_tag_delete, cmd_tag_list = _lazy("versions:cmd_tag_delete"), _lazy("versions:cmd_tag_list")
parse_instant, parse_tag_name = _lazy("versions:parse_instant"), _lazy("versions:parse_tag_name")

EPILOG = """\
examples:
  lakefmt snapshots /data/events              snapshots of a table on local disk
  lakefmt history /data/events --limit 10     what the last 10 commits did
  lakefmt expire /data/events --retain-min 10 --older-than 7d --dry-run
  lakefmt orphan-clean /data/events --older-than 2d --json
  lakefmt compact /data/events --partition dt=2026-11-01 --dry-run
  lakefmt describe s3://bucket/events -o endpoint_url=http://127.0.0.1:9000
  lakefmt files /data/events --snapshot 12 --json | jq '.[].path'
  lakefmt changes /data/events --from 12 --limit 100   rows inserted, updated, deleted since 12
  lakefmt consumers /data/events              stream readers and the snapshots they hold back
  lakefmt tag create /data/events month-end --retain 400d
  lakefmt restore /data/events --tag month-end --dry-run

storage options (-o key=value) go to fsspec/s3fs; credentials may also come from the environment
(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...). They are never printed. Values are typed:
true/false, integers, decimals, JSON objects (-o 'config_kwargs={"read_timeout": 60}'); anything else is a
string; deltalake's keys (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_REGION, ...) are translated to s3fs's.
Durations carry their unit (90m, 12h, 7d, PT1H: a bare number is refused); times are ISO-8601 (no offset:
UTC) or whole epoch milliseconds. On S3 the command gives up quickly: 3 s to connect, 5 s of silence from the
endpoint, 2 attempts per request, unless -o config_kwargs (connect_timeout, read_timeout, retries) or
AWS_MAX_ATTEMPTS / AWS_RETRY_MODE say otherwise.
"""


@dataclass(frozen=True)
class Arg:
    """One ``add_argument`` call: its flags (or positional name) and keyword arguments."""

    flags: tuple[str, ...]
    options: Mapping[str, Any]


def _arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, what runs it, its help texts and its own arguments (after the common ones).
    A command with an ``epilog`` (an example) has its description and epilog printed as written."""

    name: str
    run: Callable[[lakefmt.Table, argparse.Namespace], None]
    help: str
    description: str
    epilog: str | None = None
    args: tuple[Arg, ...] = ()
    subcommands: tuple[Command, ...] = ()  #: ``lakefmt tag create|list|delete``: each with the common arguments


#: arguments every command takes
COMMON_ARGS = (
    _arg("uri", help="table location: a path, file://, s3://bucket/path, memory://..."),
    _arg(
        "-o",
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an fsspec/s3fs storage option (repeatable)",
    ),
    _arg("--json", action="store_true", help="machine-readable JSON on stdout"),
)


_DRY_RUN = _arg("--dry-run", action="store_true", help="list what would be deleted; delete nothing")


#: the commands, in the order ``--help`` lists them
COMMANDS: tuple[Command, ...] = (
    Command(
        "snapshots",
        cmd_snapshots,
        help="snapshot history as a table",
        description="List every retained snapshot, oldest first.",
    ),
    Command(
        "history",
        cmd_history,
        help="what each snapshot did, newest first",
        description="List the retained snapshots newest first with their operation (WRITE, OVERWRITE, DELETE,\n"
        "COMPACT, RESTORE, SCHEMA CHANGE, UPSERT, MERGE, UPGRADE), its parameters (predicate, partition,\n"
        "mode), the rows and data files each added and removed, and who committed it.",
        args=(_arg("--limit", type=positive, default=None, metavar="N", help="the N newest snapshots only"),),
    ),
    Command(
        "describe",
        cmd_describe,
        help="schema, partitioning, keys, latest snapshot, live files",
        description="Describe a table: format version, schema, partition keys, primary key and buckets (key\n"
        "tables), options, latest snapshot, size, and the rows its deletion vectors delete (version 3).",
    ),
    Command(
        "files",
        cmd_files,
        help="live files of a snapshot",
        description="List the data files a snapshot reads (the latest by default). On a format-version-3 table\n"
        "every live file is listed, data and deletion vectors, with its content and bucket; rows is a data\n"
        "file's row count or the positions a deletion-vector file deletes, deleted the rows of a data file\n"
        "that its deletion vector deletes.",
        args=(_arg("--snapshot", type=snapshot_id, default=None, metavar="N", help="snapshot id (default: latest)"),),
    ),
    Command(
        "changes",
        cmd_changes,
        help="the rows snapshots inserted, updated and deleted (change data feed)",
        description="Show the change data feed of snapshots --from+1 .. --to: every row each snapshot inserted,\n"
        "updated (an update_preimage and an update_postimage row, on a key table) or deleted, read as\n"
        "the current schema, with the snapshot and its commit time. Compactions and schema changes\n"
        "change no row. Every snapshot of the range must still be retained. --from starts after a\n"
        "snapshot (as Table.changes does); Delta's --starting-version starts at one (inclusive).",
        epilog="examples:\n  lakefmt changes /data/events --from 12                 snapshots 13 .. latest\n"
        "  lakefmt changes /data/events --starting-version 12     snapshots 12 .. latest\n"
        "  lakefmt changes s3://bucket/events --from 12 --to 20 --row-kinds --json --limit 1000\n",
        args=(
            _arg(
                "--from",
                dest="start",
                type=start_id,
                default=None,
                metavar="N",
                help="the changes of the snapshots after N (0: from the first commit)",
            ),
            _arg(
                "--starting-version",
                type=start_id,
                default=None,
                metavar="N",
                help="Delta's spelling: the changes of snapshot N and later (inclusive; 0: from the table's creation)",
            ),
            _arg("--to", type=snapshot_id, default=None, metavar="M", help="up to snapshot M (default: the latest)"),
            _arg("--ending-version", type=start_id, default=None, metavar="M", help="Delta's spelling of --to"),
            _arg("--limit", type=positive, default=None, metavar="K", help="at most K rows (the first ones)"),
            _arg("--row-kinds", action="store_true", help="_row_kind +I -U +U -D in place of _change_type"),
        ),
    ),
    Command(
        "expire",
        cmd_expire,
        help="expire old snapshots and delete files only they reference",
        description="Expire snapshots: never the latest; at least --retain-min are kept; at most --retain-max;\n"
        "those committed more than --older-than ago go. A rule not given comes from the table's options\n"
        "snapshot.num-retained.min (default 10), snapshot.num-retained.max (default: no limit) and\n"
        "snapshot.time-retained (default 1h), as after every commit; the output says why what was kept was kept.\n"
        "Data files, manifests and manifest lists that only expired snapshots reference are deleted, then the\n"
        "snapshot files. Time travel to an expired snapshot fails afterwards. Try --dry-run first.",
        epilog="example:\n  lakefmt expire s3://bucket/events --retain-min 10 --retain-max 500 \\\n"
        "      --older-than 7d --dry-run\n",
        args=(
            _arg(
                "--retain-min",
                type=positive,
                default=None,
                metavar="N",
                help="always keep this many (default: snapshot.num-retained.min, 10)",
            ),
            _arg(
                "--retain-max",
                type=positive,
                default=None,
                metavar="N",
                help="never keep more than this many (default: snapshot.num-retained.max, no limit)",
            ),
            _arg(
                "--older-than",
                type=duration,
                default=None,
                metavar="AGE",
                help="expire snapshots older than AGE, with its unit: 90m, 12h, 7d or ISO-8601 PT1H (a bare number is "
                "refused; default: snapshot.time-retained, 1h)",
            ),
            _DRY_RUN,
        ),
    ),
    Command(
        "orphan-clean",
        cmd_orphan_clean,
        help="delete files no snapshot references",
        description="Delete files under the table root that no retained snapshot references (failed commits,\n"
        "interrupted writes, temp files) and that are older than --older-than, so files of commits in\n"
        "flight are never touched. Try --dry-run first.",
        epilog="example:\n  lakefmt orphan-clean /data/events --older-than 2d --dry-run\n",
        args=(
            _arg(
                "--older-than",
                type=duration,
                default=DEFAULT_ORPHAN_OLDER_THAN,
                metavar="AGE",
                help="only files last modified before AGE ago, with its unit: 90m, 12h, 7d or ISO-8601 PT1H (a bare "
                f"number is refused; default {format_duration_ms(DEFAULT_ORPHAN_OLDER_THAN_MS)})",
            ),
            _DRY_RUN,
        ),
    ),
    Command(
        "schema",
        cmd_schema,
        help="the schema with field ids; --history: the changes per schema id",
        description="Show the table's current schema: every column (nested fields too) with its field id, type\n"
        "and nullability. --history lists every schema id with what changed in it (added, dropped,\n"
        "renamed, widened, made nullable, reordered), by field id.",
        epilog="examples:\n  lakefmt schema /data/events\n  lakefmt schema s3://bucket/events --history --json\n",
        args=(_arg("--history", action="store_true", help="every schema id and what changed in it"),),
    ),
    Command(
        "upgrade",
        cmd_upgrade,
        help="upgrade a format-version-1 table to version 2",
        description="Upgrade a format-version-1 table to version 2: publish the next schema with the same columns\n"
        "and field ids assigned in column order, and a snapshot that records it. No data file is rewritten.\n"
        "Readers that know only version 1 can no longer read the table's new snapshots. The first schema\n"
        "change of a version-1 table upgrades it too. Try --dry-run first.",
        epilog="example:\n  lakefmt upgrade /data/events --dry-run\n",
        args=(_arg("--dry-run", action="store_true", help="show the schema it would publish; write nothing"),),
    ),
    Command(
        "compact",
        cmd_compact,
        help="merge small data files into target-size files",
        description="Compact a table: in each partition, the data files under 3/4 of the target size are merged, in\n"
        "commit order, into files of about the target size, once the partition holds --min-files of them;\n"
        "larger files are left alone. One snapshot of kind COMPACT: the rows, time travel and the writers'\n"
        "exactly-once state are unchanged, and streams and incremental reads skip it. Writers committing\n"
        "meanwhile never fail; a partition whose files a concurrent commit removed is planned again once or\n"
        "given up (reported). The replaced files stay until expire removes the last snapshot that reads\n"
        "them. --sort-by sorts each partition's rows, so that min/max pruning skips more files. Defaults\n"
        "come from the table options target-file-size (128 MiB) and compaction.min.file-num (5).",
        epilog="examples:\n  lakefmt compact /data/events --dry-run\n"
        "  lakefmt compact /data/events --partition dt=2026-11-01 --sort-by user_id,ts\n"
        "  lakefmt compact /data/events --partition dt=__null__          (the rows whose dt is null)\n"
        "  lakefmt compact s3://bucket/events --target-file-size 256MiB --min-files 10 --json\n",
        args=(
            _arg(
                "--partition",
                type=parse_partition,
                action="append",
                default=[],
                metavar="K=V[,K=V]",
                help="only this partition (values of some or all partition keys; a null value is __null__, as "
                "its folder is named, or __HIVE_DEFAULT_PARTITION__; the text __null__ itself is %%5F_null__); "
                "repeat for more",
            ),
            _arg(
                "--target-file-size",
                type=parse_target_size,
                default=None,
                metavar="SIZE",
                help="about this large new files: 128MiB, 512kb, 1g (default: target-file-size)",
            ),
            _arg(
                "--min-files",
                type=positive,
                default=None,
                metavar="N",
                help="compact a partition once it holds N small files (default: compaction.min.file-num; on a key "
                "table, a bucket once it holds N files, default 1: every bucket whole)",
            ),
            _arg("--sort-by", type=parse_sort_by, default=None, metavar="C[,C]", help="sort rows by these columns"),
            _arg("--dry-run", action="store_true", help="show what would be compacted; write nothing"),
        ),
    ),
    Command(
        "tag",
        cmd_tag_list,
        help="named snapshots that expire and orphan-clean keep: create, list, delete",
        description="Tags name a snapshot: read it with scan(tag=...) or the Spark option tag, restore it with\n"
        "lakefmt restore --tag. expire and orphan-clean keep every file a tag's snapshot reads, also after the\n"
        "snapshot itself expired, until the tag is deleted or its --retain time has passed; a tag never holds\n"
        "other snapshots back. Deleting a tag leaves the files only it kept to the next orphan-clean.",
        epilog="examples:\n  lakefmt tag create /data/events month-end-2026-11 --retain 400d\n"
        "  lakefmt tag list s3://bucket/events --json\n  lakefmt tag delete /data/events month-end-2026-11\n",
        subcommands=(
            Command(
                "create",
                cmd_tag_create,
                help="name a snapshot (the latest by default)",
                description="Create tag NAME for snapshot --snapshot (default: the latest). A name is taken once: of\n"
                "two racing creates one wins, the other fails.",
                args=(
                    _arg("name", type=parse_tag_name, metavar="NAME", help="1-200 of A-Z a-z 0-9 . _ -"),
                    _arg("--snapshot", type=snapshot_id, default=None, metavar="N", help="default: the latest"),
                    _arg(
                        "--retain",
                        type=positive_duration,
                        default=None,
                        metavar="AGE",
                        help="keep the tag this long after its creation, with its unit: 90d, 12h, P90D "
                        "(default: until deleted)",
                    ),
                ),
            ),
            Command("list", cmd_tag_list, help="every tag", description="List the table's tags, by name."),
            Command(
                "delete",
                cmd_tag_delete,
                help="delete a tag",
                description="Delete tag NAME. The files only it kept are left to the next orphan-clean.",
                args=(_arg("name", type=parse_tag_name, metavar="NAME", help="the tag to delete"),),
            ),
        ),
    ),
    Command(
        "restore",
        cmd_restore,
        help="commit a new snapshot whose rows equal an older one's",
        description="Restore an older version as a new snapshot (Delta's RESTORE): the live files the target does\n"
        "not have are removed, the target's files that are not live are added again (no data is copied).\n"
        "Newer snapshots stay, so a restore can be undone by another. Exactly-once is not rolled back: a\n"
        "streaming batch committed after the target and replayed later is still recognised and skipped. A\n"
        "commit landing meanwhile makes the restore fail (nothing lands). Name the version with one of\n"
        "--snapshot, --tag or --as-of. Try --dry-run first.",
        epilog="examples:\n  lakefmt restore /data/events --snapshot 12 --dry-run\n"
        "  lakefmt restore s3://bucket/events --as-of 2026-11-30T23:59:59Z --json\n",
        args=(
            _arg("--snapshot", type=snapshot_id, default=None, metavar="N", help="the snapshot to restore"),
            _arg("--tag", type=parse_tag_name, default=None, metavar="NAME", help="the tag to restore"),
            _arg(
                "--as-of",
                type=parse_instant,
                default=None,
                metavar="TIME",
                help="the snapshot current at TIME: ISO-8601 (no offset: UTC) or whole epoch milliseconds",
            ),
            _arg("--dry-run", action="store_true", help="show what would be removed and added; commit nothing"),
        ),
    ),
    Command(
        "consumers",
        cmd_consumers,
        help="readers whose position expiration respects; --delete one",
        description="List the table's consumers: readers (e.g. a Spark stream with the option consumerId) that\n"
        "record the first snapshot they have not finished reading, next_snapshot. expire never removes a\n"
        "snapshot from a live consumer's next_snapshot on. A consumer whose record is older than the\n"
        "table option consumer.expiration-time is expired: it holds nothing back and expire deletes its\n"
        "record. unread = snapshots committed since its position. --delete ID removes a consumer that is\n"
        "gone, so expiration stops keeping snapshots for it. Try --dry-run first.",
        epilog="examples:\n  lakefmt consumers /data/events\n"
        "  lakefmt consumers s3://bucket/events --json\n"
        "  lakefmt consumers /data/events --delete silver-job --dry-run\n",
        args=(
            _arg(
                "--delete",
                type=consumer_id,
                default=None,
                metavar="ID",
                help="delete the record of consumer ID (it stops holding snapshots back)",
            ),
            _arg("--dry-run", action="store_true", help="with --delete: say what would be deleted; delete nothing"),
        ),
    ),
)
