"""HTTP-level fault injection into a moto S3 server running in this process.

The WSGI application of moto's ``ThreadedMotoServer`` (``DomainDispatcherApplication``) is wrapped while
installed: a request whose path or query names the watched key prefix is, at the configured rate (at random;
for conditional PUTs, the snapshot publishes, exactly every 1/rate-th one, cycling through the faults),
answered

* ``500`` InternalError, not applied;
* ``503`` SlowDown, not applied;
* ``409`` ConditionalRequestConflict, not applied (only a conditional PUT, ``If-None-Match: *``: it is what
  AWS answers while another conditional write of the key is in flight);
* ``applied-500``: applied, then answered ``500`` (only writes: PUT, POST, DELETE): the answer was lost.

Requests under other prefixes (other tests) pass untouched. Counts per fault and per request kind are kept.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["FAULTS", "WireFaults"]

FAULTS = ("500", "503", "409", "applied-500")

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

    def _choose(self, kind: str) -> str | None:
        applicable = [
            f
            for f in self.kinds
            if (f != "409" or kind == "conditional-PUT")
            and (f != "applied-500" or kind in ("PUT", "conditional-PUT", "POST", "DELETE"))
        ]
        with self._lock:
            self.counts[f"requests {kind}"] += 1
            n = self.counts[f"requests {kind}"]
            if not applicable:
                return None
            if kind == "conditional-PUT":
                # the snapshot publishes: every (1/rate)-th one, cycling through the faults, so each of them
                # surely hits a publish at least a few times in a run of a few hundred commits
                every = max(1, round(1 / self.rate))
                if n % every != every // 2:
                    return None
                fault = applicable[(n // every) % len(applicable)]
            else:
                if self._random.random() >= self.rate:
                    return None
                fault = self._random.choice(applicable)
            self.counts[f"{fault} {kind}"] += 1
            return fault

    def _handle(
        self, call: Callable[[Callable[..., Any]], Any], environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Any:
        prefix = self.prefix
        watched = prefix is not None and (
            prefix in str(environ.get("PATH_INFO", "")) or prefix in str(environ.get("QUERY_STRING", ""))
        )
        fault = self._choose(self.request_kind(environ)) if watched and self.rate > 0 else None
        if fault is None:
            return call(start_response)
        if fault == "applied-500":
            captured: list[Any] = []
            body = call(lambda status, headers, exc_info=None: captured.append(status))
            try:
                for _ in body:  # let the write happen in full; its answer is dropped
                    pass
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
            return _error(environ, start_response, fault)
        _drain(environ)
        return _error(environ, start_response, fault)

    def total(self, fault: str) -> int:
        return sum(n for key, n in self.counts.items() if key.startswith(f"{fault} "))
