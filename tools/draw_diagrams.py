"""Draw the two diagrams of the guides as SVG, from the code:

* ``docs/img/spark_roles.svg`` (docs/spark.md): what runs on the driver, on the executors and in the committer for
  a Spark write and read. Every function and method it names is looked up in the sources (``ast``), so a rename
  stops this script instead of leaving a stale picture.
* ``docs/img/file_lifecycle.svg`` (docs/maintenance.md): the life of data files through a commit, a compaction, a
  tag, expiration and orphan-clean. The states are not drawn by hand: the script runs those steps on a real table
  in a temporary folder and records, after each one, which data files are on disk and what references them.

    python tools/draw_diagrams.py            # rewrite both files
    python tools/draw_diagrams.py --check    # exit 1 if a committed file differs from what the code draws now

Plain SVG written by hand (no plotting library), in the colours of the benchmark plots.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pyarrow as pa

import lakefmt

__all__ = ["defined_names", "draw_file_lifecycle", "draw_spark_roles", "file_lifecycle", "main"]

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img"
GREEN, LIGHT_GREEN, BLUE, RED, ORANGE, GREY = "#1b7837", "#7fbf7b", "#2166ac", "#b2182b", "#e08214", "#bdbdbd"
FONT = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""


# -- SVG primitives ---------------------------------------------------------------------------------------------
class Svg:
    """An SVG document built element by element."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, *, fill: str = "none", stroke: str = "none",
             rx: float = 6, dash: bool = False, width: float = 1.2) -> None:
        extra = ' stroke-dasharray="5 4"' if dash else ""
        self.parts.append(
            f'<rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" rx="{rx:g}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width:g}"{extra}/>'
        )

    def text(self, x: float, y: float, s: str, *, size: float = 12, weight: str = "normal", color: str = "#222",
             anchor: str = "start", mono: bool = False) -> None:
        family = ' font-family="DejaVu Sans Mono, Menlo, Consolas, monospace"' if mono else ""
        self.parts.append(
            f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" font-weight="{weight}" fill="{color}" '
            f'text-anchor="{anchor}"{family}>{escape(s)}</text>'
        )

    def arrow(self, x1: float, y1: float, x2: float, y2: float, *, color: str = "#444", dash: bool = False) -> None:
        extra = ' stroke-dasharray="5 4"' if dash else ""
        self.parts.append(
            f'<line x1="{x1:g}" y1="{y1:g}" x2="{x2:g}" y2="{y2:g}" stroke="{color}" stroke-width="1.6" '
            f'marker-end="url(#head)"{extra}/>'
        )

    def render(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'viewBox="0 0 {self.width} {self.height}" {FONT}>\n'
            '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker></defs>\n'
            f'<rect width="{self.width}" height="{self.height}" fill="white"/>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


# -- the Spark picture -------------------------------------------------------------------------------------------
def defined_names(roots: Iterable[Path]) -> set[str]:
    """``function`` and ``Class.method`` for every top-level function, class and method under ``roots``."""
    names: set[str] = set()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.ClassDef):
                    names.add(node.name)
                    names.update(
                        f"{node.name}.{item.name}"
                        for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    )
    return names


@dataclass(frozen=True)
class Box:
    """One step in one lane: a title, the code that does it (names checked against the sources), what it does."""

    title: str
    code: tuple[str, ...]
    notes: tuple[str, ...]


LANES = (
    ("Driver", "plans; Python workers of the driver's JVM", BLUE),
    ("Executors", "tasks; pyspark.worker, one per core", GREEN),
    ("Committer", "on the driver; one Python worker", ORANGE),
)
WRITE = (
    Box("1. plan the write", ("LakefmtDataSource.writer", "LakefmtDataSource.streamWriter", "table_for_write"),
        ("checks the options", "opens or creates the table", "checks the schema (mergeSchema)",
         "before any task runs")),
    Box("2. each task writes", ("BatchWriter.write", "StreamWriter.write", "Table.new_writer", "TableWriter.write",
                                "TableWriter.prepare_commit"),
        ("Parquet data files", "one manifest per task", "returns a small commit message")),
    Box("3. one commit", ("BatchWriter.commit", "StreamWriter.commit", "Table.new_committer", "Committer.commit"),
        ("merges the tasks' manifests", "publishes snapshot-N (put-if-absent)", "batch id replayed: skipped")),
)
READ = (
    Box("plan the read", ("Reader.partitions", "StreamReader.latestOffset", "StreamReader.partitions",
                          "StreamReader.commit"),
        ("snapshot, manifests, pruning", "read tasks of about 128 MB", "stream offsets, consumer record")),
    Box("each task reads", ("Reader.read", "StreamReader.read", "Table.read_files"),
        ("Parquet data files, by field id", "deletion vectors applied")),
)


def _spark_names() -> set[str]:
    names = defined_names([REPO / "spark" / "pyspark_lakefmt", REPO / "lakefmt"])
    missing = [c for box in WRITE + READ for c in box.code if c not in names]
    if missing:
        raise SystemExit(f"draw_diagrams: the Spark picture names code that no longer exists: {', '.join(missing)}")
    return names


def _box(svg: Svg, x: float, y: float, w: float, h: float, box: Box, color: str) -> None:
    svg.rect(x, y, w, h, fill="white", stroke=color, width=1.6)
    svg.text(x + 10, y + 20, box.title, size=13.5, weight="bold", color=color)
    line = y + 40
    for code in box.code:
        svg.text(x + 12, line, code, size=11, mono=True, color="#333")
        line += 15
    line += 4
    for note in box.notes:
        svg.text(x + 12, line, note, size=11.5, color="#222")
        line += 16


def draw_spark_roles() -> str:
    """The Spark picture: three lanes (driver, executors, committer), a write row, a read row, the storage."""
    _spark_names()
    width, lane_w, gap, left = 960, 296, 24, 20
    svg = Svg(width, 630)
    svg.text(width / 2, 28, "A Spark write and read with lakefmt: who runs what", size=16, weight="bold",
             anchor="middle")
    xs = [left + i * (lane_w + gap) for i in range(3)]
    for x, (name, what, color) in zip(xs, LANES, strict=True):
        svg.rect(x, 44, lane_w, 440, fill="#f7f7f7", stroke="#d0d0d0", rx=8)
        svg.text(x + lane_w / 2, 66, name, size=14.5, weight="bold", color=color, anchor="middle")
        svg.text(x + lane_w / 2, 83, what, size=11.5, color="#555", anchor="middle")
    svg.text(left + 8, 106, "write (batch or micro-batch)", size=11.5, weight="bold", color="#555")
    for x, box, (_, _, color) in zip(xs, WRITE, LANES, strict=True):
        _box(svg, x + 10, 114, lane_w - 20, 190, box, color)
    svg.arrow(xs[0] + lane_w - 10, 190, xs[1] + 10, 190)
    svg.arrow(xs[1] + lane_w - 10, 190, xs[2] + 10, 190)
    svg.text(left + 8, 326, "read (batch or stream)", size=11.5, weight="bold", color="#555")
    for x, box, (_, _, color) in zip(xs, READ, LANES, strict=False):
        _box(svg, x + 10, 334, lane_w - 20, 140, box, color)
    svg.arrow(xs[0] + lane_w - 10, 400, xs[1] + 10, 400)
    svg.rect(xs[2] + 10, 334, lane_w - 20, 140, stroke="#bbb", dash=True)
    svg.text(xs[2] + lane_w / 2, 394, "a read commits nothing", size=11.5, color="#777", anchor="middle")
    svg.text(xs[2] + lane_w / 2, 411, "(a stream records its consumer", size=11, color="#777", anchor="middle")
    svg.text(xs[2] + lane_w / 2, 426, "position on the driver)", size=11, color="#777", anchor="middle")
    # what crosses between the processes
    svg.text(xs[1] - gap / 2, 212, "tasks", size=10.5, color="#444", anchor="middle")
    svg.text(xs[2] - gap / 2, 212, "commit", size=10.5, color="#444", anchor="middle")
    svg.text(xs[2] - gap / 2, 225, "messages", size=10.5, color="#444", anchor="middle")
    svg.text(xs[1] - gap / 2, 422, "read", size=10.5, color="#444", anchor="middle")
    svg.text(xs[1] - gap / 2, 435, "tasks", size=10.5, color="#444", anchor="middle")
    # storage
    svg.rect(left, 510, width - 2 * left, 100, fill="#eef3f8", stroke=BLUE, rx=8)
    svg.text(left + 12, 532, "the table's folder (local disk, S3, any fsspec filesystem)", size=13, weight="bold",
             color=BLUE)
    svg.text(xs[1] + 10, 560, "written by the executors:", size=11.5, weight="bold", color=GREEN)
    svg.text(xs[1] + 10, 577, "data files (Parquet),", size=11.5)
    svg.text(xs[1] + 10, 593, "one manifest per task", size=11.5)
    svg.text(xs[2] + 10, 560, "written by the committer:", size=11.5, weight="bold", color=ORANGE)
    svg.text(xs[2] + 10, 577, "merged manifests, manifest lists,", size=11.5)
    svg.text(xs[2] + 10, 593, "snapshot/snapshot-N (the publish)", size=11.5)
    svg.text(left + 12, 560, "read by the driver: snapshots,", size=11.5)
    svg.text(left + 12, 577, "manifest lists, manifests;", size=11.5)
    svg.text(left + 12, 593, "never the rows", size=11.5)
    svg.arrow(xs[1] + lane_w / 2, 484, xs[1] + lane_w / 2, 509, color=GREEN)
    svg.arrow(xs[2] + lane_w / 2, 484, xs[2] + lane_w / 2, 509, color=ORANGE)
    svg.arrow(xs[0] + lane_w / 2, 509, xs[0] + lane_w / 2, 485, color=BLUE, dash=True)
    return svg.render()


# -- the life of a file ------------------------------------------------------------------------------------------
#: the states of a data file after a step, in legend order: (key, legend text, fill colour)
STATES = (
    ("live", "in the latest snapshot", GREEN),
    ("old", "only in older snapshots (time travel)", LIGHT_GREEN),
    ("tag", "kept only by a tag (its snapshot expired)", ORANGE),
    ("loose", "on disk, in no snapshot or tag", GREY),
    ("deleted", "deleted by this step", RED),
)
ROWS = {
    "A": "A: appended, snapshot 1",
    "B": "B: appended, snapshot 2",
    "C": "C: written by a task that crashed",
    "D": "D: A and B compacted, snapshot 3",
}


SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(n: int) -> pa.Table:
    return pa.table({"id": range(n), "v": [f"row {i}" for i in range(n)]}, schema=SCHEMA)


def _data_files(root: Path) -> set[str]:
    return {
        Path(dirpath, name).relative_to(root).as_posix()
        for dirpath, _, names in os.walk(root)
        for name in names
        if name.endswith(".parquet")
    }


def file_lifecycle() -> list[tuple[str, dict[str, str]]]:
    """Run the life of four data files on a real table; return, per step, its title and each file's state."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        t = lakefmt.create_table(str(root), SCHEMA)
        committer = t.new_committer(commit_user="job")
        labels: dict[str, str] = {}
        steps: list[tuple[str, dict[str, str]]] = []
        gone: set[str] = set()

        def record(title: str) -> None:
            on_disk = _data_files(root)
            live = {f.path for f in t.files()} if t.latest_snapshot() else set()
            older = {f.path for s in t.snapshots() for f in t.files(s.id)} - live
            tagged = {f.path for tag in t.tags() for f in t.scan(tag=tag.name).files()} - live - older
            new = sorted(on_disk - labels.keys(), key=lambda p: (p not in live, p))
            for path in new:
                labels[path] = "ABCD"[len(labels)]
            state = {}
            for path, label in labels.items():
                if path in gone:
                    continue
                if path not in on_disk:
                    state[label] = "deleted"
                    gone.add(path)
                else:
                    state[label] = (
                        "live" if path in live else "old" if path in older else "tag" if path in tagged else "loose"
                    )
            steps.append((title, state))

        writer = t.new_writer()
        writer.write(_rows(10))
        message = writer.prepare_commit()
        record("a task writes A")
        committer.commit([message], identifier=1)
        record("commit: snapshot 1")
        writer = t.new_writer()
        writer.write(_rows(10))
        committed = writer.prepare_commit()
        crashed = t.new_writer()
        crashed.write(_rows(10))
        crashed.prepare_commit()  # its commit message is lost: the task's driver never commits it
        committer.commit([committed], identifier=2)
        record("commit B: snapshot 2; C's task dies")
        t.create_tag("v1", 2)
        record("tag v1 on snapshot 2")
        t.compact(min_files=2)
        record("compact: snapshot 3")
        t.expire_snapshots(retain_max=1)
        record("expire: keep the latest")
        t.delete_tag("v1")
        record("delete tag v1")
        t.remove_orphan_files(older_than=0)
        record("orphan-clean")
        if sorted(labels.values()) != sorted(ROWS):
            raise SystemExit(f"draw_diagrams: expected the data files {sorted(ROWS)}, saw {sorted(labels.values())}")
        return steps


def draw_file_lifecycle(steps: list[tuple[str, dict[str, str]]]) -> str:
    """The lifecycle grid: a row per data file, a column per step, each cell the file's state after the step."""
    label_w, col_w, top, row_h = 250, 92, 118, 44
    width = label_w + col_w * len(steps) + 20
    svg = Svg(width, top + row_h * len(ROWS) + 140)
    svg.text(width / 2, 26, "The life of a data file: commit, compaction, tag, expire, orphan-clean", size=16,
             weight="bold", anchor="middle")
    svg.text(width / 2, 45, "(recorded on a real table by tools/draw_diagrams.py: each cell is the file's state "
             "after the step above it)", size=11.5, color="#555", anchor="middle")
    fills = {key: color for key, _, color in STATES}
    for i, (title, _) in enumerate(steps):
        x = label_w + i * col_w + col_w / 2
        words, lines, line = title.split(), [], ""
        for word in words:
            if line and len(line) + 1 + len(word) > 14:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
        for k, text in enumerate(lines[:4]):
            svg.text(x, top - 52 + 14 * k + (4 - len(lines)) * 7, text, size=11, anchor="middle")
    for r, (label, text) in enumerate(ROWS.items()):
        y = top + r * row_h
        svg.text(12, y + row_h / 2 + 4, text, size=12.5, weight="bold" if label == "D" else "normal")
        for i, (_, state) in enumerate(steps):
            key = state.get(label)
            if key is None:
                continue
            x = label_w + i * col_w
            svg.rect(x + 4, y + 6, col_w - 8, row_h - 12, fill=fills[key], rx=5)
            if key == "deleted":
                svg.text(x + col_w / 2, y + row_h / 2 + 4, "deleted", size=11, color="white", weight="bold",
                         anchor="middle")
    legend_y = top + row_h * len(ROWS) + 28
    for k, (_, text, color) in enumerate(STATES):
        x, y = 12 + (k % 3) * 330, legend_y + (k // 3) * 22
        svg.rect(x, y - 11, 14, 14, fill=color, rx=3)
        svg.text(x + 20, y, text, size=11.5)
    notes = (
        "Expiration deletes what only expired snapshots reference, but keeps what a tag reads. Once the tag is",
        "deleted, orphan-clean removes those files, and the file of the crashed task (older_than=0 here; 1 day",
        "by default, so that the files of a commit in flight are never touched).",
    )
    for k, note in enumerate(notes):
        svg.text(12, legend_y + 56 + 16 * k, note, size=11.5, color="#333")
    return svg.render()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/draw_diagrams.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="folder of the SVG files (default: docs/img)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    drawn = {"spark_roles.svg": draw_spark_roles(), "file_lifecycle.svg": draw_file_lifecycle(file_lifecycle())}
    stale = []
    for name, text in drawn.items():
        path = args.out / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path}")
    if args.check and stale:
        print(f"out of date (run python tools/draw_diagrams.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
