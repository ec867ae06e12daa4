"""A socket-free client of the web console (:mod:`wsframework.console`): requests go straight
into the service's WSGI application, the session cookie is kept as a browser keeps it, and
POSTs carry the page's Origin and CSRF header unless a test says otherwise."""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import urlsplit

from wsframework.wsgi import WsgiApplication

ADMIN_TOKEN = "console-test-token"


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def all_headers(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        return json.loads(self.body)


@dataclass
class ConsoleClient:
    service: object
    remote_addr: str = "127.0.0.1"
    cookies: dict[str, str] = field(default_factory=dict)
    csrf: str | None = None

    @property
    def origin(self) -> str:
        base = urlsplit(self.service.base_url)
        return f"{base.scheme}://{base.netloc}"

    def request(self, method: str, path: str, body: bytes = b"", headers=None,
                content_type: str | None = None) -> Answer:
        split = urlsplit(path)
        environ = {"REQUEST_METHOD": method, "PATH_INFO": split.path,
                   "QUERY_STRING": split.query, "REMOTE_ADDR": self.remote_addr,
                   "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body),
                   "HTTP_HOST": urlsplit(self.service.base_url).netloc}
        if content_type:
            environ["CONTENT_TYPE"] = content_type
        if self.cookies:
            environ["HTTP_COOKIE"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        for name, value in (headers or {}).items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        seen = {}

        def start_response(status, response_headers):
            seen["status"], seen["headers"] = int(status.split()[0]), response_headers

        body_out = b"".join(WsgiApplication(self.service)(environ, start_response))
        answer = Answer(seen["status"], list(seen["headers"]), body_out)
        for line in answer.all_headers("Set-Cookie"):
            jar = SimpleCookie()
            jar.load(line)
            for name, morsel in jar.items():
                if morsel.value and morsel["max-age"] != "0":
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
        return answer

    def get(self, path: str, **kwargs) -> Answer:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, document=None, *, headers=None, csrf: bool = True,
             raw: bytes | None = None, content_type: str = "application/json") -> Answer:
        sent = {"Origin": self.origin}
        if csrf and self.csrf:
            sent["X-CSRF-Token"] = self.csrf
        sent.update(headers or {})
        body = raw if raw is not None else json.dumps(document or {}).encode()
        return self.request("POST", path, body, sent, content_type)

    def login(self, token: str = ADMIN_TOKEN) -> Answer:
        answer = self.post("/console/api/login", {"token": token})
        if answer.status == 200:
            self.csrf = answer.json()["csrf"]
        return answer
