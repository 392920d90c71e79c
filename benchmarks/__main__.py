"""``python -m benchmarks [--quick] [--only NAME] [--skip NAME] [--out DIR] [--workdir DIR] [--keep]``"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import BENCHMARKS
from benchmarks.common import PACKAGE_DIR, Result, drop_tree, environment, table_rows, write_result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 5 minutes in total)")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    parser.add_argument("--skip", action="append", default=[], choices=BENCHMARKS, metavar="NAME",
                        help="leave this benchmark out (repeatable)")
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR / "results",
                        help="folder for the JSON results (default: benchmarks/results)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the benchmark tables are written (default: a new temporary folder); "
                             "use a folder on the disk you want to measure")
    parser.add_argument("--keep", action="store_true", help="keep the tables written under --workdir")
    args = parser.parse_args(argv)

    names = [n for n in args.only or BENCHMARKS if n not in args.skip]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lakefmt-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    print(f"lakefmt benchmarks ({mode}): {', '.join(names)}", flush=True)
    results: list[Result] = []
    failed: list[str] = []
    t_all = time.perf_counter()
    try:
        for name in names:
            module = importlib.import_module(f"benchmarks.{name}")
            env = environment()
            env["loadavg_before"] = _loadavg()
            t0 = time.perf_counter()
            try:
                result: Result = module.run(args.quick, workdir / name)
            except Exception as exc:  # report and go on with the other benchmarks
                print(f"[{name}] FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                failed.append(name)
                continue
            result.duration_s = time.perf_counter() - t0
            env["loadavg_after"] = _loadavg()
            result.environment = env
            path = write_result(result, args.out)
            results.append(result)
            print(f"[{name}] done in {result.duration_s:.1f} s -> {_shown(path)}", flush=True)
            print(table_rows([result]), flush=True)
    finally:
        if not args.keep and args.workdir is None:
            drop_tree(workdir)
    print(f"\nall done in {time.perf_counter() - t_all:.1f} s\n", flush=True)
    if results:
        print(table_rows(results))
    missed = [f"{r.benchmark}: {c.name}" for r in results for c in r.comparisons if c.met is False]
    if missed:
        print("\ntargets missed:\n  " + "\n  ".join(missed))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
