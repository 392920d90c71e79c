"""Spark tests: one real SparkSession (``local[2]``) for the whole run, stopped at the end.

Spark's Python workers import ``pyspark_lakefmt`` and ``lakefmt`` from the *installed* package (pyspark finds
the data source by listing installed top-level ``pyspark_*`` modules, which an editable install hides), so the
session fixture first checks that the installed copy matches this checkout and fails with the command to run
when it does not: a stale copy would test old code.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
#: a ``sitecustomize`` for the Python processes Spark starts: they import the installed pyspark, bytecode cached,
#: instead of compiling it from ``pyspark.zip`` in each process (see worker_path/pyspark_site.py)
WORKER_PATH = HERE / "worker_path"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/spark needs pyspark and Java: mark it ``spark``."""
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.spark)


def _stale_installed_files() -> list[str]:
    """Source files of this checkout that differ from (or are missing in) the package Spark's workers import.
    A checkout on ``sys.path`` itself (a ``.pth`` file naming it, as in development) is never stale."""
    stale = []
    for package, source in (("pyspark_lakefmt", REPO / "spark" / "pyspark_lakefmt"), ("lakefmt", REPO / "lakefmt")):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            return [f"{package} (not installed)"]
        installed = Path(spec.origin).resolve().parent
        if installed == source.resolve():
            continue
        for src in sorted(source.rglob("*.py")):
            dst = installed / src.relative_to(source)
            if not dst.is_file() or not filecmp.cmp(src, dst, False):
                stale.append(str(src.relative_to(REPO)))
    return stale


@pytest.fixture(scope="session", autouse=True)
def spark_worker_path() -> Iterator[None]:
    """WORKER_PATH first on ``PYTHONPATH`` from the first Spark test on: the shared session's JVM, and the child
    drivers the SIGKILL and cluster tests start, pass it on to every Python process Spark starts."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(WORKER_PATH), before]))
    yield
    if before is None:
        del os.environ["PYTHONPATH"]
    else:
        os.environ["PYTHONPATH"] = before


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory, spark_worker_path: None) -> Iterator[Any]:
    stale = _stale_installed_files()
    if stale:
        pytest.fail(
            "Spark's Python workers would run an installed lakefmt that differs from this checkout "
            f"({', '.join(stale[:5])}{' …' if len(stale) > 5 else ''}); run: "
            f"{sys.executable} -m pip install --no-deps --force-reinstall {REPO}",
            pytrace=False,
        )
    from pyspark_lakefmt.session import local_session

    session = local_session(
        "lakefmt-tests",
        {
            "spark.sql.python.filterPushdown.enabled": "true",
            "spark.driver.memory": "1g",
            # SQL tests declare catalog tables: Spark's default database folder goes here, not into the checkout
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse")),
        },
    )
    yield session
    session.stop()
