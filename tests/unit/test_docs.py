"""The README and the guides under docs/: every picture they show is in the repository, every link to a file of
the repository finds it, every ``#anchor`` finds a heading, and the long guides open with their contents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import load_tool

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCED = re.compile(r"^\s*(```|~~~).*?^\s*\1", re.M | re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)|<img\s[^>]*src=\"([^\"]+)\"")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)[^)]*\)")


doc_toc = load_tool("doc_toc")
draw_diagrams = load_tool("draw_diagrams")


def _prose(path: Path) -> str:
    """The markdown outside fenced code blocks and inline code."""
    text = _FENCED.sub("", path.read_text(encoding="utf-8"))
    return re.sub(r"`[^`\n]*`", "", text)


def _local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # no scheme: http:, mailto:, s3: ...


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_pictures_exist(doc: Path) -> None:
    for m in _IMAGE.finditer(_prose(doc)):
        target = m.group(1) or m.group(2)
        if _local(target):
            image = (doc.parent / target.split("#")[0]).resolve()
            assert image.is_file(), f"{doc.name} shows {target}, which is not in the repository"
            assert image.stat().st_size > 0, f"{doc.name} shows {target}, which is empty"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_and_anchors_resolve(doc: Path) -> None:
    for m in _LINK.finditer(_prose(doc)):
        target = m.group(1)
        if not _local(target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        assert linked.exists(), f"{doc.name} links to {target}: no such file"
        if anchor and linked.suffix == ".md":
            anchors = doc_toc.heading_anchors(linked.read_text(encoding="utf-8"))
            assert anchor in anchors, f"{doc.name} links to {target}: {linked.name} has no heading #{anchor}"


def test_long_guides_open_with_their_contents() -> None:
    for name in doc_toc.GUIDES:
        text = (REPO / "docs" / name).read_text(encoding="utf-8")
        assert doc_toc.START in text, f"docs/{name} has no contents (python tools/doc_toc.py)"
        first_section = min(i for i, line in enumerate(text.splitlines()) if line.startswith("## "))
        toc_line = text.splitlines().index(doc_toc.START)
        assert toc_line < first_section, f"docs/{name}: the contents are not at the top"


def test_slugs_follow_github() -> None:
    assert doc_toc.slug("Times and durations: one rule in every interface") == (
        "times-and-durations-one-rule-in-every-interface"
    )
    assert doc_toc.slug("Writes: `mergeSchema`") == "writes-mergeschema"
    assert doc_toc.slug("21. Key tables (format version 3)") == "21-key-tables-format-version-3"
    assert doc_toc.heading_anchors("## Reads\n```\n## not a heading\n```\n### Reads\n") == ["reads", "reads-1"]


def test_diagrams_are_what_the_code_draws_now(tmp_path: Path) -> None:
    """docs/img/spark_roles.svg and file_lifecycle.svg are what tools/draw_diagrams.py draws from the code today
    (the lifecycle is recorded on a real table), and the guides show them."""
    assert draw_diagrams.main(["--check"]) == 0, "run: python tools/draw_diagrams.py"
    assert "](img/spark_roles.svg)" in (REPO / "docs" / "spark.md").read_text(encoding="utf-8")
    assert "](img/file_lifecycle.svg)" in (REPO / "docs" / "maintenance.md").read_text(encoding="utf-8")
    steps = dict(draw_diagrams.file_lifecycle())
    assert steps["expire: keep the latest"] == {"A": "tag", "B": "tag", "C": "loose", "D": "live"}
    assert steps["orphan-clean"] == {"A": "deleted", "B": "deleted", "C": "deleted", "D": "live"}


def test_spark_diagram_refuses_a_name_the_code_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    box = draw_diagrams.Box("gone", ("BatchWriter.no_such_method",), ())
    monkeypatch.setattr(draw_diagrams, "READ", (*draw_diagrams.READ, box))
    with pytest.raises(SystemExit, match=r"BatchWriter\.no_such_method"):
        draw_diagrams.draw_spark_roles()
