"""HTTP-level fault injection into a moto S3 server running in this process.

The WSGI application of moto's ``ThreadedMotoServer`` (``DomainDispatcherApplication``) is wrapped while
installed: a request whose path or query names the watched key prefix is, at the configured rate (at random;
for conditional PUTs, the snapshot publishes, exactly every 1/rate-th one, cycling through the faults),
answered

* ``500`` InternalError, not applied;
* ``503`` SlowDown, not applied;
* ``409`` ConditionalRequestConflict, not applied (only a conditional PUT, ``If-None-Match: *``: it is what
  AWS answers while another conditional write of the key is in flight);
* ``applied-500``: applied, then answered ``500`` (only writes: PUT, POST, DELETE): the answer was lost;
* ``drop``: the request is read but not applied, and the connection closes without an answer (the client
  sees the server disconnect: botocore's ``ConnectionClosedError``);
* ``applied-drop``: applied in full, then the connection closes without an answer (only writes): the
  answer was lost on the wire, as when a connection breaks or a proxy times out while S3 answers.

aiohttp (under aiobotocore) resends an idempotent request (GET, HEAD, PUT, DELETE) once, at once, when the
server disconnected; a single drop would never leave the HTTP client. So a dropped idempotent request's next
``drop_repeats`` copies (same method, path, query and condition) are dropped too, unapplied (counted as
``drop-repeat``): the error then reaches botocore, whose retries (if any) come later.

Requests under other prefixes (other tests) pass untouched. Counts per fault and per request kind are kept.
With ``publish_group`` set (a function of a publish's body, e.g. its ``commitUser``), the cycle of faults on
snapshot publishes runs per group, so each committer (a one-off writer too) gets its share of every fault.
"""

from __future__ import annotations

import contextlib
import io
import random
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["FAULTS", "WireFaults"]

FAULTS = ("500", "503", "409", "applied-500", "drop", "applied-drop")
APPLIED = ("applied-500", "applied-drop")  #: the faults that apply the request first (writes only)
DROPS = ("drop", "applied-drop")
_IDEMPOTENT = ("GET", "HEAD", "PUT", "DELETE")

_ERRORS = {
    "500": ("500 Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "503": ("503 Slow Down", "SlowDown", "Please reduce your request rate."),
    "409": (
        "409 Conflict",
        "ConditionalRequestConflict",
        "A conflicting conditional operation is currently in progress against this resource. Please try again.",
    ),
}


def _drain(environ: dict[str, Any]) -> None:
    """Read the request body we will not pass on, so the connection stays usable for the next request."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return
    length = environ.get("CONTENT_LENGTH")
    if length:
        remaining = int(length)
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)
    elif environ.get("wsgi.input_terminated"):
        while stream.read(1 << 16):
            pass


class _Dropped(ConnectionResetError):
    """Raised out of the WSGI application after shutting its connection down: werkzeug treats a
    ``ConnectionError`` as a dropped connection and sends nothing."""


def _drop(environ: dict[str, Any], fault: str) -> None:
    """Close the request's connection without an answer."""
    sock = environ.get("werkzeug.socket")
    if sock is None:
        raise RuntimeError("the server does not expose its connection (werkzeug.socket): cannot drop it")
    with contextlib.suppress(OSError):  # already gone
        sock.shutdown(socket.SHUT_RDWR)
    raise _Dropped(f"injected {fault}")


def _rewind(environ: dict[str, Any]) -> bytes:
    """Read the request's body and put it back (a fresh stream) for the application to read."""
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH")
    terminated = environ.get("wsgi.input_terminated")
    body = stream.read(int(length)) if length else (stream.read() if terminated else b"")
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return bytes(body)


def _apply(call: Callable[[Callable[..., Any]], Any]) -> None:
    """Run the request in full through moto and throw its answer away."""
    body = call(lambda status, headers, exc_info=None: None)
    try:
        for _ in body:  # let the write happen in full; its answer is dropped
            pass
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()


def _error(environ: dict[str, Any], start_response: Callable[..., Any], fault: str) -> Iterable[bytes]:
    status, code, message = _ERRORS["500" if fault == "applied-500" else fault]
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?>\n'
        + f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>injected</RequestId></Error>".encode()
    )
    if environ.get("REQUEST_METHOD") == "HEAD":
        body = b""
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [body]


class WireFaults:
    """Install, set ``prefix`` and ``rate``, run the workload, read ``counts``; uninstall."""

    def __init__(self, rate: float = 0.0, prefix: str | None = None, seed: int = 5) -> None:
        self.rate = rate
        self.publish_every: int | None = None  #: every n-th conditional PUT is faulted (default: 1/rate)
        self.drop_repeats = 1  #: how many resends of a dropped idempotent request are dropped too
        #: names the committer of a snapshot publish from its body: the publish cycle then runs per committer
        self.publish_group: Callable[[bytes], str] | None = None
        self.by_group: Counter[str] = Counter()  #: "<fault> <group>" and "publishes <group>"
        self._repeat: dict[tuple[str, ...], int] = {}
        self.prefix = prefix
        self.kinds: tuple[str, ...] = FAULTS  #: the faults to choose from (where they apply)
        self.counts: Counter[str] = Counter()  #: "<fault> <request kind>" and "requests <request kind>"
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._original: Any = None

    # -- installation ---------------------------------------------------------------------------------
    def install(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        if self._original is not None:
            return
        self._original = DomainDispatcherApplication.__call__
        original = self._original
        faults = self

        def __call__(app: Any, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            return faults._handle(lambda s: original(app, environ, s), environ, start_response)

        DomainDispatcherApplication.__call__ = __call__  # type: ignore[method-assign]

    def uninstall(self) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication

        if self._original is not None:
            DomainDispatcherApplication.__call__ = self._original  # type: ignore[method-assign]
            self._original = None

    # -- per request ----------------------------------------------------------------------------------
    @staticmethod
    def request_kind(environ: dict[str, Any]) -> str:
        method = str(environ.get("REQUEST_METHOD", "GET"))
        if method == "PUT" and environ.get("HTTP_IF_NONE_MATCH") == "*":
            return "conditional-PUT"
        if method == "GET" and "list-type" in str(environ.get("QUERY_STRING", "")):
            return "LIST"
        return method

    def _choose(self, kind: str, group: str | None = None) -> str | None:
        applicable = [
            f
            for f in self.kinds
            if (f != "409" or kind == "conditional-PUT")
            and (f not in APPLIED or kind in ("PUT", "conditional-PUT", "POST", "DELETE"))
        ]
        with self._lock:
            self.counts[f"requests {kind}"] += 1
            n = self.counts[f"requests {kind}"]
            if group is not None:
                self.by_group[f"publishes {group}"] += 1
                n = self.by_group[f"publishes {group}"]
            if not applicable:
                return None
            if kind == "conditional-PUT":
                # the snapshot publishes: every (1/rate)-th one, cycling through the faults, so each of them
                # surely hits a publish at least a few times in a run of a few hundred commits
                every = self.publish_every or max(1, round(1 / self.rate))
                if n % every != every // 2:
                    return None
                fault = applicable[(n // every) % len(applicable)]
            else:
                if self._random.random() >= self.rate:
                    return None
                fault = self._random.choice(applicable)
            self.counts[f"{fault} {kind}"] += 1
            if group is not None:
                self.by_group[f"{fault} {group}"] += 1
            return fault

    def _handle(
        self, call: Callable[[Callable[..., Any]], Any], environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Any:
        prefix = self.prefix
        watched = prefix is not None and (
            prefix in str(environ.get("PATH_INFO", "")) or prefix in str(environ.get("QUERY_STRING", ""))
        )
        if not watched:
            return call(start_response)
        kind = self.request_kind(environ)
        key = tuple(
            str(environ.get(k, "")) for k in ("REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "HTTP_IF_NONE_MATCH")
        )
        with self._lock:
            again = self._repeat.pop(key, 0)
            if again > 1:
                self._repeat[key] = again - 1
            if again:
                self.counts[f"requests {kind}"] += 1
                self.counts[f"drop-repeat {kind}"] += 1
        if again:
            _drain(environ)
            _drop(environ, "drop-repeat")
        group = None
        if kind == "conditional-PUT" and self.publish_group is not None and self.rate > 0:
            group = self.publish_group(_rewind(environ))
        fault = self._choose(kind, group) if self.rate > 0 else None
        if fault is None:
            return call(start_response)
        if fault in APPLIED:
            _apply(call)
        else:
            _drain(environ)
        if fault in DROPS:
            if self.drop_repeats and key[0] in _IDEMPOTENT:
                with self._lock:
                    self._repeat[key] = self.drop_repeats
            _drop(environ, fault)
        return _error(environ, start_response, fault)

    def total(self, fault: str) -> int:
        return sum(n for key, n in self.counts.items() if key.startswith(f"{fault} "))
