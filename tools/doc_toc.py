"""Write (or check) the table of contents at the top of the long guides under ``docs/``.

The contents list the ``##`` and ``###`` headings (outside code blocks) as links to GitHub's heading anchors. They
sit between ``<!-- toc -->`` and ``<!-- /toc -->`` right before the first ``##`` heading; run this again after
adding, renaming or removing a section:

    python tools/doc_toc.py            # rewrite the contents of the guides listed in GUIDES
    python tools/doc_toc.py --check    # exit 1 and name the guides whose contents are out of date
    python tools/doc_toc.py docs/x.md  # only these files

``heading_anchors`` is also what the docs' link test resolves ``#anchor`` links against.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

__all__ = ["GUIDES", "heading_anchors", "headings", "slug", "toc_block", "with_toc"]

REPO = Path(__file__).resolve().parent.parent
#: the guides long enough to need contents (docs/format.md keeps its own numbered list)
GUIDES = ("benchmarks.md", "maintenance.md", "reliability.md", "schema-evolution.md", "spark.md")
START, END = "<!-- toc -->", "<!-- /toc -->"
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def headings(text: str) -> list[tuple[int, str]]:
    """The (level, title) of each ATX heading outside fenced code blocks, in order."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            out.append((len(m.group(1)), m.group(2)))
    return out


def slug(title: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_anchors(text: str) -> list[str]:
    """Every heading's anchor, with GitHub's ``-1``, ``-2`` suffixes for repeated titles."""
    seen: dict[str, int] = {}
    anchors = []
    for _, title in headings(text):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.append(base if n == 0 else f"{base}-{n}")
    return anchors


def toc_block(text: str) -> str:
    """The contents of a guide: its ``##`` headings, each with its ``###`` headings nested."""
    lines = [START, "Contents:", ""]
    for (level, title), anchor in zip(headings(text), heading_anchors(text), strict=True):
        if level in (2, 3):
            label = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
            lines.append(f"{'  ' * (level - 2)}- [{label}](#{anchor})")
    lines.append(END)
    return "\n".join(lines)


def with_toc(text: str) -> str:
    """The guide with its contents replaced, or inserted before the first ``##`` heading outside code."""
    if START in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        body = head + tail.lstrip("\n")
        return head + toc_block(body) + tail
    lines = text.splitlines(keepends=True)
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            return "".join(lines[:i]) + toc_block(text) + "\n\n" + "".join(lines[i:])
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/doc_toc.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="markdown files (default: the long guides in docs/)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a contents list is stale")
    args = parser.parse_args(argv)
    files = args.files or [REPO / "docs" / name for name in GUIDES]
    stale = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        new = with_toc(text)
        if new != text:
            stale.append(str(path))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"contents out of date (run python tools/doc_toc.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    for name in stale if not args.check else ():
        print(f"updated the contents of {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
