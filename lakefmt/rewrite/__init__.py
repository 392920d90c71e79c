"""Row-level changes: rewrites that replace live files (compaction, row-level delete) on one skeleton
(:mod:`lakefmt.rewrite.base`). Above ``read``, ``write`` and ``commit``; below the table, which builds the
:class:`~lakefmt.rewrite.base.RewriteTarget` they work on."""

from lakefmt.rewrite.base import RewriteTarget

__all__ = ["RewriteTarget"]
