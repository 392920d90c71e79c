"""The Python examples of the README and the guides, run and compared with the output each one shows.

Shapes (what a document may write; ``tests/integration/test_doc_examples.py`` and
``tests/spark/test_spark_doc_examples.py`` run them):

- A ```` ```python ```` block is an example. The fenced block without a language that follows it is its shown
  output when only blank lines, or one short paragraph ending in ``prints``, ``prints:`` or ``gives:``, stand
  between the two. An example with no shown output must print nothing.
- A script example runs one top-level statement at a time, as pasted into an interpreter: a statement that raises
  prints ``ErrorType: message`` (the line the docs show) and the next statement runs. Only ``print`` writes output.
- A block of ``>>>`` lines is a session: each expression's repr is its output, compared with the lines under it,
  whitespace (line wrapping) not counting.
- ``...`` in shown output matches anything within a line; a line of ``...`` alone matches any number of lines
  (what a document leaves out). Nothing else is normalised: a value that varies from run to run (a time, a uuid,
  a duration) is shown as ``...``.
- The examples of one document run in order in one namespace, in a fresh working directory, so a later example
  uses the tables of an earlier one. String literals starting ``/tmp/`` are rewritten to that directory (the
  documents' paths are readable; a run leaves nothing in /tmp).
- ``<!-- example: not run: <reason> -->`` on the line before a block excludes it, with a reason the tests count.
- An example that uses ``spark`` or ``pyspark_lakefmt`` needs Spark: it runs only with a session given.

``python tools/doc_examples.py [--spark] README.md docs/x.md`` runs a document's examples (the Spark ones with
``--spark``) and prints what each one that differs really prints, to compare or paste.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import os
import re
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
_NOT_RUN = re.compile(r"<!--\s*example:\s*not run:\s*(?P<reason>.+?)\s*-->")
_SPARK = re.compile(r"\bspark\b|\bpyspark_lakefmt\b")
_LEAD_IN = re.compile(r"(?:^|\s)(?:prints|gives):?\s*$")
_TMP_LITERAL = re.compile(r"""(?P<quote>["'])/tmp/""")


@dataclass(frozen=True)
class Example:
    """One ```python block of a document: its code, the output it shows (None: none shown) and how it runs."""

    doc: str
    line: int
    code: str
    shown: str | None
    not_run: str | None
    spark: bool

    @property
    def session(self) -> bool:
        """A ``>>>`` session rather than a script."""
        return self.code.lstrip().startswith(">>>")

    def where(self) -> str:
        """``doc:line`` of the block's opening fence."""
        return f"{self.doc}:{self.line}"


@dataclass(frozen=True)
class _Block:
    lang: str
    line: int
    text: str
    before: str  # the markdown between the previous block and this one


def _blocks(markdown: str) -> Iterator[_Block]:
    lines = markdown.splitlines()
    prose: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        indent, start = len(m.group("indent")), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        yield _Block(m.group("lang"), start + 1, "\n".join(body), "\n".join(prose))
        prose = []
        i += 1


def examples(path: Path, *, name: str | None = None) -> list[Example]:
    """Every ```python block of the markdown file ``path``, in order, with its shown output."""
    blocks = list(_blocks(path.read_text(encoding="utf-8")))
    found = []
    for k, block in enumerate(blocks):
        if block.lang != "python":
            continue
        shown = None
        if k + 1 < len(blocks) and blocks[k + 1].lang == "":
            between = blocks[k + 1].before.strip()
            if not between or ("\n\n" not in between and _LEAD_IN.search(between)):
                shown = blocks[k + 1].text
        last = block.before.strip().splitlines()[-1:] or [""]
        not_run = _NOT_RUN.search(last[0])
        found.append(
            Example(
                doc=name or path.name,
                line=block.line,
                code=block.text,
                shown=shown,
                not_run=not_run.group("reason") if not_run else None,
                spark=bool(_SPARK.search(block.text)),
            )
        )
    return found


def _line_matches(shown: str, actual: str) -> bool:
    parts = [re.escape(p) for p in shown.split("...")]
    return re.fullmatch(".*".join(parts), actual) is not None


def output_matches(shown: str, actual: str) -> bool:
    """Whether ``actual`` is the output ``shown`` (trailing spaces and blank lines aside; ``...`` as above)."""
    want = [line.rstrip() for line in shown.rstrip().splitlines()]
    got = [line.rstrip() for line in actual.rstrip().splitlines()]
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(want):
                ok = j == len(got)
            elif want[i].strip() == "...":
                ok = match(i + 1, j) or (j < len(got) and match(i, j + 1))
            else:
                ok = j < len(got) and _line_matches(want[i], got[j]) and match(i + 1, j + 1)
            memo[(i, j)] = ok
        return memo[(i, j)]

    return match(0, 0)


def _session_matches(shown: str, actual: str) -> bool:
    flat = " ".join(shown.split())
    return re.fullmatch(".*".join(re.escape(p) for p in flat.split("...")), " ".join(actual.split())) is not None


def _error_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}\n"


class Runner:
    """Runs the examples of one document in order, in one namespace, in the working directory ``workdir``."""

    def __init__(self, workdir: Path, *, spark: Any = None, trace: bool = False) -> None:
        self.workdir = workdir
        self.trace = trace
        self.namespace: dict[str, Any] = {"__name__": "__doc_example__"}
        if spark is not None:
            self.namespace["spark"] = spark

    def _code(self, code: str) -> str:
        return _TMP_LITERAL.sub(lambda m: f"{m.group('quote')}{self.workdir}/", code)

    def _exec(self, source: str, mode: str, out: io.StringIO) -> None:
        code = compile(source, "<doc example>", mode)
        cwd = os.getcwd()
        os.chdir(self.workdir)
        try:
            with contextlib.redirect_stdout(out):
                try:
                    exec(code, self.namespace)
                except Exception as error:  # the example shows the error's line
                    out.write(_error_line(error))
                    if self.trace:
                        sys.stderr.write("".join(traceback.format_exception(error)))
        finally:
            os.chdir(cwd)

    def run(self, example: Example) -> str:
        """The output of ``example``: a script's prints and error lines, or a session's reprs."""
        out = io.StringIO()
        code = self._code(example.code)
        if example.session:
            for part in doctest.DocTestParser().get_examples(code):
                self._exec(part.source, "single", out)
            return out.getvalue()
        try:
            tree = ast.parse(code)
        except SyntaxError as error:  # an example that is not Python as written
            return _error_line(error)
        for node in tree.body:
            module = ast.Module(body=[node], type_ignores=[])
            self._exec(ast.unparse(module) + "\n", "exec", out)
        return out.getvalue()

    def check(self, example: Example) -> str | None:
        """None when ``example`` prints what it shows, else a message with both outputs."""
        if example.session:
            problems = []
            for part in doctest.DocTestParser().get_examples(self._code(example.code)):
                out = io.StringIO()
                self._exec(part.source, "single", out)
                if not _session_matches(part.want, out.getvalue()):
                    problems.append(f">>> {part.source.strip()}\nshown:\n{part.want}got:\n{out.getvalue()}")
            return f"{example.where()}: " + "\n".join(problems) if problems else None
        actual = self.run(example)
        shown = example.shown or ""
        if output_matches(shown, actual):
            return None
        return f"{example.where()}: the example prints\n{actual}\nbut the document shows\n{shown}"


#: documents whose examples continue another's ("Continuing the key-table example of the README"): that one's
#: examples run first, in the same namespace and directory, unchecked (its own test checks them)
CONTINUES = {"changes.md": Path(__file__).resolve().parents[1] / "README.md"}


def check_document(path: Path, runner: Runner) -> list[tuple[Example, str | None]]:
    """Run the examples of ``path`` (after those of the document it continues) with ``runner``: each example run
    with None when it printed what it shows, else the problem. Spark examples run only when the runner has a
    session."""
    spark = "spark" in runner.namespace
    if path.name in CONTINUES:
        for example in examples(CONTINUES[path.name]):
            if not example.not_run and (spark or not example.spark):
                runner.run(example)
    return [
        (example, runner.check(example))
        for example in examples(path)
        if not example.not_run and (spark or not example.spark)
    ]


def main(argv: list[str]) -> int:
    """Print the real output of each example of the documents named in ``argv`` (``--spark``: the Spark ones
    too, in a local session; ``--trace``: and the traceback of each error)."""
    import tempfile

    spark = None
    if "--spark" in argv:
        from pyspark_lakefmt.session import local_session

        spark = local_session("doc-examples", {"spark.sql.python.filterPushdown.enabled": "true"})
    failed = 0
    for doc in (a for a in argv if not a.startswith("--")):
        with tempfile.TemporaryDirectory() as tmp:
            runner = Runner(Path(tmp), spark=spark, trace="--trace" in argv)
            if Path(doc).name in CONTINUES:
                for example in examples(CONTINUES[Path(doc).name]):
                    if not example.not_run and (spark is not None or not example.spark):
                        runner.run(example)
            for example in examples(Path(doc), name=doc):
                if example.not_run or (example.spark and spark is None):
                    print(f"== {example.where()}: not run ({example.not_run or 'needs Spark: --spark'})")
                    continue
                problem = runner.check(example)
                failed += problem is not None
                print(f"== {example.where()}: {'ok' if problem is None else 'DIFFERS'}")
                if problem is not None:
                    print(problem)
    if spark is not None:
        spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
