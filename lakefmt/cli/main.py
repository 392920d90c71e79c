"""The ``lakefmt`` parser, built from the command table (:mod:`lakefmt.cli.commands`), and :func:`main`, which
checks the storage options (:mod:`lakefmt.cli.storage`), runs a command and turns any failure into one line on
stderr (:mod:`lakefmt.cli.output`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import lakefmt
from lakefmt.cli.commands import COMMANDS, COMMON_ARGS, EPILOG, Arg
from lakefmt.errors import LakefmtError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2). A missing command is reported as the
    unknown options given instead of one, when there are (``lakefmt --bogus`` names ``--bogus``, as argparse names
    them once a command is given)."""

    _argv: Sequence[str] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required: COMMAND"):
            unknown = [
                a for a in self._argv if a.startswith("-") and a.split("=", 1)[0] not in self._option_string_actions
            ]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add(parser: argparse.ArgumentParser, args: Sequence[Arg]) -> None:
    for a in args:
        parser.add_argument(*a.flags, **a.options)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, built from the table :data:`lakefmt.cli.commands.COMMANDS` (exposed for documentation
    and tests)."""
    parser = _Parser(
        prog="lakefmt",
        description="Inspect and maintain lakefmt tables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"lakefmt {lakefmt.__version__}")
    common = _Parser(add_help=False)
    _add(common, COMMON_ARGS)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(
            command.name,
            parents=[] if command.subcommands else [common],  # a command with actions: its actions take them
            help=command.help,
            description=command.description,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter if command.epilog else argparse.HelpFormatter,
        )
        _add(p, command.args)
        p.set_defaults(func=command.run)
        if command.subcommands:
            nested = p.add_subparsers(dest=f"{command.name}_command", required=True, metavar="ACTION")
            for action in command.subcommands:
                q = nested.add_parser(action.name, parents=[common], help=action.help, description=action.description)
                _add(q, action.args)
                q.set_defaults(func=action.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lakefmt`` console script."""
    args = build_parser().parse_args(argv)

    def usage_error(message: str) -> int:
        prog = f"lakefmt {args.command}"
        print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
        return 2

    low, high = getattr(args, "retain_min", None), getattr(args, "retain_max", None)
    if high is not None and low is not None and high < low:
        return usage_error(f"--retain-max ({args.retain_max}) must be at least --retain-min ({args.retain_min})")
    if args.command == "consumers" and args.dry_run and args.delete is None:
        return usage_error("--dry-run goes with --delete ID (listing deletes nothing)")
    if args.command == "changes" and (args.start is None) == (args.starting_version is None):
        return usage_error("name where the changes start with one of --from N (after N) or --starting-version N")
    if args.command == "changes" and args.to is not None and args.ending_version is not None:
        return usage_error("name where the changes end with one of --to M or --ending-version M")
    if args.command == "restore" and sum(v is not None for v in (args.snapshot, args.tag, args.as_of)) != 1:
        return usage_error("name the version to restore with one of --snapshot N, --tag NAME or --as-of TIME")
    from lakefmt.cli.output import _failure, _one_line
    from lakefmt.cli.storage import (
        _check_options,
        _check_uri,
        _env_storage_options,
        _s3_defaults,
        _s3fs_missing,
        _s3fs_retries,
        _scheme,
        _storage_options,
        _UsageError,
    )

    try:
        _check_uri(args.uri)
        options = {**_env_storage_options(args.uri), **_storage_options(args.storage_option)}
        if _scheme(args.uri) == "s3":
            if (missing := _s3fs_missing()) is not None:
                print(f"lakefmt: error: {missing}", file=sys.stderr)
                return 1
            options = _s3_defaults(_check_options(args.uri, options))
        else:
            options = _check_options(args.uri, options)
    except (argparse.ArgumentTypeError, _UsageError) as exc:
        return usage_error(str(exc))
    try:
        with _s3fs_retries(args.uri, options):
            table = lakefmt.open_table(args.uri, storage_options=options)
            args.func(table, args)
    except BrokenPipeError:  # e.g. piped into head: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("lakefmt: interrupted", file=sys.stderr)
        return 130
    except LakefmtError as exc:
        print(f"lakefmt: error: {_one_line(str(exc), options)}", file=sys.stderr)
        return 1
    except Exception as exc:  # storage clients raise many types; none of them deserves a traceback
        if os.environ.get("LAKEFMT_TRACEBACK"):
            raise
        print(f"lakefmt: error: {_one_line(_failure(exc, args.uri, options), options)}", file=sys.stderr)
        return 1
    return 0

