"""Every Python example of README.md and docs/*.md runs and prints the output the document shows.

The rules are those of ``tools/doc_examples.py``: the examples of one document run in order, in one namespace
(a later example uses the tables an earlier one made), in a fresh temporary directory that ``/tmp/...`` literals
are rewritten to; ``...`` in shown output matches anything within a line, a line of ``...`` alone any lines. The
examples that need Spark run in ``tests/spark/test_spark_doc_examples.py`` (with the documents' other examples,
in order); here they are left out, and a document whose later examples depend on one is run only there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import load_tool
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: The examples marked ``<!-- example: not run: ... -->``, per document. Changing this is a decision: every
#: example that is not run is one that can drift from the code unseen.
NOT_RUN = {"README.md": 1, "format.md": 1, "maintenance.md": 1}


doc_examples = load_tool("doc_examples")
#: documents run whole by the Spark test, since an example after a Spark one reads what it wrote
SPARK_DOCS = {"spark.md", "changes.md"}


@pytest.mark.parametrize("doc", [d for d in DOCS if d.name not in SPARK_DOCS], ids=lambda p: p.name)
def test_examples_print_what_they_show(doc: Path, tmp_path: Path) -> None:
    results = doc_examples.check_document(doc, doc_examples.Runner(tmp_path))
    problems = [problem for _, problem in results if problem is not None]
    assert not problems, "\n\n".join(problems)
    assert results or not doc_examples.examples(doc), f"{doc.name}: no example ran"


def test_examples_not_run_are_counted() -> None:
    counts: dict[str, int] = {}
    for doc in DOCS:
        for example in doc_examples.examples(doc):
            if example.not_run:
                counts[doc.name] = counts.get(doc.name, 0) + 1
    assert counts == NOT_RUN


def test_every_example_with_spark_is_run_by_the_spark_test() -> None:
    """A Spark example outside the documents the Spark test runs would be run by no test."""
    for doc in DOCS:
        if doc.name not in SPARK_DOCS:
            spark = [e.where() for e in doc_examples.examples(doc) if e.spark and not e.not_run]
            assert not spark, f"{spark} need Spark: add {doc.name} to SPARK_DOCS"


def test_shown_output_and_errors_are_compared(tmp_path: Path) -> None:
    """The checker itself: an example that prints something else, raises, or prints without showing it fails;
    ``...`` matches within a line, and a line of ``...`` any lines."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```python\nprint('a 12 b')\nprint(1)\nprint(2)\nprint(3)\n```\n\nprints\n\n```\na ... b\n...\n3\n```\n\n"
        "```python\nprint('x')\n```\n\n"
        "```python\nraise ValueError('bad')\nprint('after')\n```\n\n```\nValueError: bad\nafter\n```\n\n"
        "```python\nprint('no')\n```\n\n```\nyes\n```\n\n"
        "```python\n>>> 1 + 1\n3\n>>> x = 1\n>>> x\n1\n```\n",
        encoding="utf-8",
    )
    runner = doc_examples.Runner(tmp_path)
    results = [runner.check(e) is None for e in doc_examples.examples(doc)]
    assert results == [True, False, True, False, False]
    assert doc_examples.output_matches("a ... b", "a 12 b")
    assert not doc_examples.output_matches("a ... b", "a 1\n2 b")


_LINES = st.lists(st.text(st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")), max_size=20), max_size=6)


@settings(max_examples=60, deadline=None)
@given(lines=_LINES, cut=st.integers(0, 6))
def test_ellipsis_stands_for_what_it_replaces_and_nothing_else_differs(lines: list[str], cut: int) -> None:
    """Output matches itself; a line of ``...`` matches the lines it replaced; a changed line does not match."""
    lines = [line.replace(".", "").rstrip() for line in lines]  # no accidental ellipsis in the shown text
    while lines and not lines[-1]:
        lines.pop()  # trailing blank lines do not count (the documented rule)
    actual = "\n".join(lines)
    assert doc_examples.output_matches(actual, actual)
    shown = "\n".join([*lines[:cut], "...", *lines[cut + 2 :]])
    assert doc_examples.output_matches(shown, actual)
    if lines and lines[-1].strip():
        assert not doc_examples.output_matches("\n".join([*lines[:-1], lines[-1].strip() + "x"]), actual)
