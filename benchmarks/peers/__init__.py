"""Peers of lakefmt (pypaimon, deltalake, pyiceberg), run from lakefmt's virtualenv in their own.

The peers are never dependencies of lakefmt: ``tools/bench-setup.sh`` installs them into virtualenvs under
``benchmarks/.venvs/`` (pypaimon pins pyarrow < 20, so it gets one of its own; deltalake and pyiceberg share one).
Each peer has a standalone script here (``<peer-short-name>_commits.py``: stdlib, pyarrow, the peer and the
shared ``harness.py``, no lakefmt) that times N append commits and prints one JSON line last; :func:`run_peer`
runs it in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent
VENVS_DIR = PEERS_DIR.parent / ".venvs"
SETUP_HINT = "run tools/bench-setup.sh"


@dataclass(frozen=True)
class Peer:
    name: str  # the PyPI package
    venv: str  # folder under benchmarks/.venvs/
    script: str  # file in benchmarks/peers/


PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer("pypaimon", "paimon", "paimon_commits.py"),
        Peer("deltalake", "delta-iceberg", "delta_commits.py"),
        Peer("pyiceberg", "delta-iceberg", "iceberg_commits.py"),
    )
}


class PeerError(RuntimeError):
    """A peer's script failed, timed out or printed no JSON result."""


def python_for(peer: str) -> Path | None:
    """The interpreter of ``peer``'s virtualenv, or None if ``tools/bench-setup.sh`` has not completed for it
    (the script writes ``.bench-ready`` into a virtualenv once its installs succeeded)."""
    venv = VENVS_DIR / PEERS[peer].venv
    python = venv / "bin" / "python"
    if not (venv / ".bench-ready").is_file() or not python.exists():
        return None
    return python


def run_peer(peer: str, *, root: Path, commits: int, rows: int, partitioned: bool,
             time_budget: float | None = None, timeout: float = 1800) -> dict[str, Any]:
    """Run ``peer``'s commit script in its virtualenv; return the JSON object it printed last.

    ``root`` must not exist yet (the script creates it). Raises :class:`PeerError` with the tail of stderr if
    the virtualenv is missing, the script fails (including its row-count sanity check) or times out."""
    python = python_for(peer)
    if python is None:
        raise PeerError(f"peer {peer} not set up: {SETUP_HINT}")
    cmd = [str(python), str(PEERS_DIR / PEERS[peer].script), "--root", str(root), "--commits", str(commits),
           "--rows", str(rows), "--partitioned", "1" if partitioned else "0"]
    if time_budget is not None:
        cmd += ["--time-budget", str(time_budget)]
    root.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=root.parent)
    except subprocess.TimeoutExpired as exc:
        tail = _tail(exc.stderr)
        raise PeerError(f"peer {peer} timed out after {timeout:g} s:\n{tail}") from exc
    if proc.returncode != 0:
        raise PeerError(f"peer {peer} failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    lines = proc.stdout.strip().splitlines()
    try:
        out: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError) as exc:
        raise PeerError(f"peer {peer} printed no JSON result:\n{_tail(proc.stdout)}\n{_tail(proc.stderr)}") from exc
    return out


def _tail(text: str | bytes | None, limit: int = 4000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return text[-limit:]


__all__ = ["PEERS", "SETUP_HINT", "Peer", "PeerError", "python_for", "run_peer"]
