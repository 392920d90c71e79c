"""The Python examples of the documents that use Spark (docs/spark.md, docs/changes.md) run with the shared Spark
session and print the output they show.

Each document's examples run in order, in one namespace holding ``spark`` (the shared session), in a fresh
temporary directory that ``/tmp/...`` literals are rewritten to, with the rules of ``tools/doc_examples.py``
(``tests/integration/test_doc_examples.py`` runs the other documents). The session's SQL configuration is put
back afterwards: an example may set one (``spark.sql.sources.partitionOverwriteMode``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import load_tool

REPO = Path(__file__).resolve().parents[2]


doc_examples = load_tool("doc_examples")
SPARK_DOCS = [REPO / "docs" / "spark.md", REPO / "docs" / "changes.md"]

#: Examples not yet runnable as written, by document and first line of code other than an import: each must
#: still fail (one that passes is taken off the list), every other must pass. These still show their input data
#: in prose only (a table "holding ids 1, 2, 3", an ``events`` table with a ``user`` column, the ``tt`` table),
#: need an S3 endpoint, or (changes.md) run their second micro-batch in a comment.
PENDING = {
    "changes.md": {"def sink(df, batch_id):"},  # its second run (after an upsert) is a comment; its output is shown
    "spark.md": {
        'snap = pyspark_lakefmt.delete(spark, "s3://bucket/events", "dt < \'2026-01-01\' AND amount > 900",',
        'updates = spark.createDataFrame([(2, "bob", 2), (4, "dee", 1)], "id long, name string, visits long")',
        'more = spark.createDataFrame([(3, "cid", "2026-11-02", "fr")], "id long, user string, dt string, country '
        'string")',
        'df = spark.read.format("lakefmt").option("snapshotId", "1").load("/tmp/lakefmt-demo/tt")',
        '(events.writeStream.format("lakefmt")',
    },
}


def _key(example: Any) -> str:
    """An example's name in PENDING: its first line of code other than an import (line numbers move)."""
    lines = [line for line in example.code.splitlines() if line.strip()]
    return next((line for line in lines if not line.startswith(("import ", "from "))), lines[0])


@pytest.fixture
def session(spark: Any) -> Iterator[Any]:
    before = dict(spark.conf.getAll)
    yield spark
    for key, value in dict(spark.conf.getAll).items():
        if key not in before:
            spark.conf.unset(key)
        elif before[key] != value:
            spark.conf.set(key, before[key])


@pytest.mark.parametrize("doc", SPARK_DOCS, ids=lambda p: p.name)
def test_spark_examples_print_what_they_show(doc: Path, tmp_path: Path, session: Any) -> None:
    results = doc_examples.check_document(doc, doc_examples.Runner(tmp_path, spark=session))
    pending = PENDING.get(doc.name, set())
    assert pending <= {_key(e) for e, _ in results}, "PENDING names an example the document no longer has"
    problems = [problem for e, problem in results if problem is not None and _key(e) not in pending]
    assert not problems, "\n\n".join(problems)
    fixed = [e.where() for e, problem in results if problem is None and _key(e) in pending]
    assert not fixed, f"{fixed} now print what they show: take them off PENDING"
    assert results, f"{doc.name}: no example ran"
