"""The console's HTTP handler: the page shell and its assets, login and logout, and the JSON
API of the panels roles register (see the package docstring for the contract)."""
from __future__ import annotations

import hmac
import json
import logging
import math
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

from ..http_routes import HttpRequest, HttpResponse, json_response
from .auth import LoginThrottle, SessionStore

log = logging.getLogger(__name__)

PREFIX = "/console"
CSRF_HEADER = "x-csrf-token"
MAX_TOKEN_CHARS = 1024
# The page's scripts and styles are files of this package; nothing inline, nothing elsewhere.
SECURITY_HEADERS = [
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "
     "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
     "frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
]
# the files served under {base}/console/static/ (nothing else of the package is reachable)
ASSETS = {"app.js": "text/javascript; charset=utf-8", "console.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}


class ConsoleError(Exception):
    """A refusal an API handler raises: answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ApiCall:
    """What an API handler gets: the query parameters (GET) or the JSON object (POST)."""
    params: dict[str, Any]
    request: HttpRequest


ApiHandler = Callable[[ApiCall], Any]


class Console:
    """One service's console: ``console.add_api(name, handler, action=...)`` plugs a panel's
    data in; the handler answers JSON-serialisable data or raises :class:`ConsoleError`."""

    def __init__(self, service, *, role: str | None = None, clock=None):
        self.base_url = service.base_url
        self.role = role or service.config.role
        self.cookie = service.names.console_cookie  # the application names its cookie
        self._token = (service.config.admin_token or "").encode()
        pinned = {"clock": clock} if clock is not None else {}
        self.sessions = SessionStore(service.store, **pinned)
        self.throttle = LoginThrottle(service.store, **pinned)
        self._apis: dict[tuple[str, bool], ApiHandler] = {}
        base = urlsplit(self.base_url)
        self.secure = base.scheme == "https"
        self._origin = f"{base.scheme}://{base.netloc}".lower()

    def add_api(self, name: str, handler: ApiHandler, *, action: bool = False) -> None:
        """``GET {base}/console/api/NAME`` (a read) or, with ``action``, ``POST`` (a change:
        CSRF token and same origin required)."""
        if not name or not all(c.isalnum() or c == "-" for c in name):
            raise ValueError(f"an API name is letters, digits and '-': {name!r}")
        if (name, action) in self._apis or name in ("session", "login", "logout"):
            raise ValueError(f"the console API {name!r} is already registered")
        self._apis[(name, action)] = handler

    def features(self) -> list[str]:
        return sorted({name for name, _ in self._apis})

    # -- the route ---------------------------------------------------------------------------
    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path[len(PREFIX):]
        method = "GET" if request.method == "HEAD" else request.method
        try:
            if path in ("", "/") and method == "GET":
                return self._asset("index.html", "text/html; charset=utf-8")
            if path.startswith("/static/") and method == "GET":
                name = path[len("/static/"):]
                if name in ASSETS:
                    return self._asset(name, ASSETS[name])
                return self._json(404, {"error": "not found"})
            if path.startswith("/api/"):
                return self._api(path[len("/api/"):], method, request)
            return self._json(404 if method == "GET" else 405, {"error": "not found"})
        except ConsoleError as exc:
            return self._json(exc.status, {"error": exc.message})

    def _api(self, name: str, method: str, request: HttpRequest) -> HttpResponse:
        if method == "POST":
            self._same_origin(request)
        session_id = _cookie(request, self.cookie)
        if name == "login" and method == "POST":
            return self._login(request, session_id)
        session = self.sessions.get(session_id)
        if name == "session" and method == "GET":
            if session is None:
                return self._json(200, {"authenticated": False, "role": self.role})
            return self._json(200, {"authenticated": True, "role": self.role,
                                    "csrf": session.csrf, "features": self.features()})
        if session is None:
            raise ConsoleError(401, "log in first (no session, or it expired)")
        if method == "POST":
            if not session.csrf_matches(request.headers.get(CSRF_HEADER)):
                raise ConsoleError(403, "missing or wrong CSRF token")
            if name == "logout":
                self.sessions.end(session_id)
                return self._json(200, {"authenticated": False},
                                  [("Set-Cookie", self._cookie("", 0))])
        handler = self._apis.get((name, method == "POST"))
        if handler is None or method not in ("GET", "POST"):
            raise ConsoleError(404, f"no console API {name!r} for {method}")
        params = _json_body(request) if method == "POST" else _query(request.query)
        return self._json(200, handler(ApiCall(params, request)))

    def _login(self, request: HttpRequest, old_session: str | None) -> HttpResponse:
        address = request.remote_addr
        wait = self.throttle.wait(address)
        if wait > 0:
            return self._json(429, {"error": f"too many failed logins: try again in "
                                             f"{math.ceil(wait)} s"},
                              [("Retry-After", str(math.ceil(wait)))])
        token = _json_body(request).get("token")
        if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not self._token \
                or not hmac.compare_digest(token.encode("utf-8", "replace"), self._token):
            self.throttle.failed(address)
            log.warning("console login refused from %s", address)
            raise ConsoleError(401, "wrong admin token")
        self.throttle.succeeded(address)
        self.sessions.end(old_session)  # a login never keeps a session id chosen before it
        session_id, session = self.sessions.create()
        max_age = int(self.sessions.max_seconds)
        return self._json(200, {"authenticated": True, "role": self.role, "csrf": session.csrf,
                                "features": self.features()},
                          [("Set-Cookie", self._cookie(session_id, max_age))])

    def _same_origin(self, request: HttpRequest) -> None:
        """A state-changing request comes from a page of this service: its Origin (else its
        Referer's origin) is the base URL's, or the scheme and Host it was sent to."""
        claimed = request.headers.get("origin")
        if not claimed or claimed == "null":
            referer = urlsplit(request.headers.get("referer") or "")
            claimed = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
        claimed = claimed.lower().rstrip("/")
        host = (request.headers.get("host") or "").lower()
        allowed = {self._origin}
        if host:
            allowed.add(f"{urlsplit(self._origin).scheme}://{host}")
        if claimed not in allowed:
            raise ConsoleError(403, "cross-origin request refused (Origin or Referer must be "
                                    "this console's)")

    # -- answers -----------------------------------------------------------------------------
    def _cookie(self, value: str, max_age: int) -> str:
        attributes = [f"{self.cookie}={value}", f"Path={PREFIX}", f"Max-Age={max_age}",
                      "HttpOnly", "SameSite=Strict"]
        if self.secure:
            attributes.append("Secure")
        return "; ".join(attributes)

    def _json(self, status: int, document, headers=None) -> HttpResponse:
        return json_response(status, document, [*SECURITY_HEADERS, *(headers or [])])

    def _asset(self, name: str, content_type: str) -> HttpResponse:
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        # the shell and its files change with the package: revalidate rather than go stale
        return HttpResponse(200, [("Content-Type", content_type), ("Cache-Control", "no-cache"),
                                  *SECURITY_HEADERS], body)


def _cookie(request: HttpRequest, name: str) -> str | None:
    raw = request.headers.get("cookie")
    if not raw or len(raw) > 8192:
        return None
    jar = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _json_body(request: HttpRequest) -> dict:
    """The POST body as a JSON object; only ``application/json`` (which a cross-site form
    cannot send) is read. The edge has bounded its size."""
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise ConsoleError(415, "the body must be application/json")
    try:
        document = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ConsoleError(400, "the body is not JSON") from None
    if not isinstance(document, dict):
        raise ConsoleError(400, "the body must be a JSON object")
    return document


def _query(query: str) -> dict[str, str]:
    return dict(parse_qsl(query or "", keep_blank_values=True)[:20])
