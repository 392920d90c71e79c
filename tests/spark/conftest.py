"""Spark tests: one real SparkSession (``local[2]``) for the whole run, stopped at the end.

Spark's Python workers import ``pyspark_lakefmt`` and ``lakefmt`` from the *installed* package (pyspark finds
the data source by listing installed top-level ``pyspark_*`` modules, which an editable install hides), so the
session fixture first checks that the installed copy matches this checkout and fails with the command to run
when it does not: a stale copy would test old code.
"""

from __future__ import annotations

import filecmp
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


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


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
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
