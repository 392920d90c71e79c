"""Test-only crash injection for tests/spark/test_crash.py. Never imported by lakefmt.

The test copies this file as ``sitecustomize.py`` into a temp dir that it puts first on the PYTHONPATH of the
streaming child. The child's JVM passes its environment on to Spark's Python workers, so every Python process
of the child (the driver script, the executors' workers, the driver-side commit worker) runs this at start-up.
With ``LAKEFMT_CRASH_AT=<point>:<n>`` set, the n-th time (counted across all those processes through a file)
the process reaches ``<point>``, it writes a marker and SIGKILLs the child's whole process group (and its own
group: pyspark's daemon puts its workers in a group of their own). Points:

``in_write``        inside ``TableWriter.write``, after the rows went in (data files open, half written)
``task_written``    after ``TableWriter.prepare_commit`` wrote the files and the task's manifest
``before_publish``  at the ``before-publish`` hook: the commit's manifests and lists are written, no snapshot yet
``in_publish``      in the exclusive create of ``snapshot-N``: its temp file is written, not yet linked
``after_publish``   at the ``after-publish`` hook: the snapshot landed, before Spark records the batch

Patching happens lazily when lakefmt's modules are imported, so processes that never import lakefmt pay nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from typing import Any

with contextlib.suppress(ImportError):  # from worker_path, next on the PYTHONPATH (whose sitecustomize this hides)
    import pyspark_site  # noqa: F401

_SPEC = os.environ.get("LAKEFMT_CRASH_AT", "")
_STATE = os.environ.get("LAKEFMT_CRASH_STATE", "")


def _reached(point: str, detail: dict[str, Any]) -> None:
    """Count one arrival at ``point``; on the chosen one, leave a marker and kill the child's process groups."""
    want, _, nth = _SPEC.partition(":")
    if point != want:
        return
    os.makedirs(_STATE, exist_ok=True)
    with open(os.path.join(_STATE, "count"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # the counter is shared by every Python process of the child
        f.seek(0)
        count = int(f.read() or 0) + 1
        f.seek(0)
        f.truncate()
        f.write(str(count))
        f.flush()
        if count != int(nth or 1):
            return
        marker = {"point": point, "count": count, "pid": os.getpid(), "time": time.time(), **detail}
        with open(os.path.join(_STATE, "killed.json"), "w") as m:
            json.dump(marker, m)
            m.flush()
            os.fsync(m.fileno())
        # The child (and its JVM) first, then this process's own group (pyspark's daemon and its workers).
        with contextlib.suppress(KeyError, ValueError, ProcessLookupError):
            os.killpg(int(os.environ["LAKEFMT_CRASH_PGID"]), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)
        time.sleep(60)  # never reached


def _patch_writer(module: Any) -> None:
    cls = module.TableWriter
    write, prepare = cls.write, cls.prepare_commit

    @functools.wraps(write)
    def crash_write(self: Any, data: Any) -> None:
        write(self, data)
        open_files = sum(1 for s in self._partitions.values() if s.file is not None)
        _reached("in_write", {"open_files": open_files, "source": module.__file__})

    @functools.wraps(prepare)
    def crash_prepare(self: Any) -> Any:
        message = prepare(self)
        _reached("task_written", {"files": [f.path for f in self.written_files], "source": module.__file__})
        return message

    cls.write, cls.prepare_commit = crash_write, crash_prepare


def _patch_committer(module: Any) -> None:
    """Through lakefmt's public publish hooks: before and after the snapshot's exclusive create."""

    def crash_at_publish(phase: str, snap: Any) -> None:
        detail = {
            "snapshot": snap.id,
            "identifier": snap.commit_identifier,
            "user": snap.commit_user,
            "source": module.__file__,
        }
        _reached("before_publish" if phase == "before-publish" else "after_publish", detail)

    module.add_publish_hook(crash_at_publish)


def _patch_os_link() -> None:
    link = os.link

    @functools.wraps(link)
    def crash_link(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        name = os.path.basename(os.fsdecode(dst))
        if name.startswith("snapshot-") and os.path.basename(os.path.dirname(os.fsdecode(dst))) == "snapshot":
            with open(src, "rb") as f:
                snap = json.loads(f.read())
            detail = {
                "snapshot": snap["id"],
                "identifier": snap["commitIdentifier"],
                "user": snap.get("commitUser"),
                "temp": os.fsdecode(src),
            }
            _reached("in_publish", detail)
        link(src, dst, *args, **kwargs)

    os.link = crash_link


_PATCHES = {"lakefmt.write.writer": _patch_writer, "lakefmt.hooks": _patch_committer}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Runs a patch right after one of lakefmt's modules has been executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


if _SPEC and _STATE:
    sys.meta_path.insert(0, _PatchOnImport())
    if _SPEC.startswith("in_publish:"):
        _patch_os_link()
