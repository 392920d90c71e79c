"""The error names are written out three times (``lakefmt.errors.__all__``, and ``lakefmt``'s import and
``__all__``), because type checkers read only literal lists: these tests keep the copies from drifting apart."""

from __future__ import annotations

import inspect

import lakefmt
from lakefmt import errors

#: raised only by key tables, imported from ``lakefmt.errors``: not exported at the top level
NOT_AT_TOP = {"DeletionVectorsError", "KeyTableError"}


def test_errors_all_lists_every_error_class_it_defines() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.LakefmtError) and value.__module__ == errors.__name__
    }
    assert sorted(errors.__all__) == sorted(defined)


def test_the_top_level_exports_every_error_but_those_of_key_tables() -> None:
    top = {name for name in lakefmt.__all__ if name in vars(errors)}
    assert top == set(errors.__all__) - NOT_AT_TOP
    for name in top:
        assert getattr(lakefmt, name) is getattr(errors, name), name
    for name in NOT_AT_TOP:
        assert name not in dir(lakefmt)
