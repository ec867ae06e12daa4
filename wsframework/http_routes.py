"""Plain HTTP routes beside the SOAP endpoint: pages and text that are not SOAP messages (a
metrics exposition, a web console), registered by the roles that serve them.

A route is a path prefix, the methods it answers and a handler ``(HttpRequest) ->
HttpResponse``; the WSGI edge (:mod:`wsframework.wsgi`) asks :meth:`Routes.find` first and
falls back to SOAP (POST) or ``/health`` and ``?wsdl`` (GET). The edge bounds what a handler
sees: the body is read only up to ``MAX_ROUTE_BODY`` (a larger one is answered 413 without
reading it), the headers are the request's ``HTTP_*`` variables lower-cased with dashes,
and a handler's exception is a 500 whose body names no internals. A handler decides its own
authentication: nothing here is open or closed by default.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["HttpRequest", "HttpResponse", "Routes", "MAX_ROUTE_BODY", "text", "json_response"]

MAX_ROUTE_BODY = 64 * 1024  # forms and small JSON actions; never a bulk upload


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)  # "cookie", "content-type", ...
    body: bytes = b""
    remote_addr: str | None = None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def text(status: int, body: str, content_type: str = "text/plain; charset=utf-8",
         headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    return HttpResponse(status, [("Content-Type", content_type), *(headers or [])],
                        body.encode("utf-8"))


def json_response(status: int, document, headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    import json
    return HttpResponse(status, [("Content-Type", "application/json"),
                                 ("Cache-Control", "no-store"), *(headers or [])],
                        json.dumps(document).encode("utf-8"))


Handler = Callable[[HttpRequest], HttpResponse]


class Routes:
    """The service's plain HTTP routes (thread-safe registration; lookups by longest prefix)."""

    def __init__(self):
        self._routes: list[tuple[str, frozenset[str], Handler]] = []
        self._lock = threading.Lock()

    def add(self, prefix: str, handler: Handler, methods=("GET",)) -> None:
        if not prefix.startswith("/") or (prefix != "/" and prefix.endswith("/")):
            raise ValueError(f"a route prefix starts with '/' and does not end with one: {prefix!r}")
        methods = frozenset(m.upper() for m in methods)
        if "GET" in methods:
            methods |= {"HEAD"}
        with self._lock:
            if any(p == prefix for p, _, _ in self._routes):
                raise ValueError(f"a route is already registered at {prefix}")
            self._routes.append((prefix, methods, handler))
            self._routes.sort(key=lambda route: len(route[0]), reverse=True)

    def find(self, path: str) -> tuple[frozenset[str], Handler] | None:
        """The route whose prefix is ``path`` or a parent of it (``/console`` serves
        ``/console`` and ``/console/...``, never ``/consoles``)."""
        for prefix, methods, handler in self._routes:
            if path == prefix or path.startswith(prefix + "/"):
                return methods, handler
        return None
