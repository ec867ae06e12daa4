"""The web console package (wsframework.console) over HTTP, socket-free through the WSGI app:
the page and its files, login, the session cookie, CSRF and origin refusals, throttling,
expiry and logout, and the JSON API a role registers."""
from __future__ import annotations

import re
import sqlite3
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from tests.support.console_client import ADMIN_TOKEN, ConsoleClient
from wsframework.console import PREFIX, Console, ConsoleError, console_of
from wsframework.console.app import ASSETS
from wsframework.service import Service, ServiceConfig, ServiceNames

BASE = "http://127.0.0.1:8080"


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


NAMES = ServiceNames(store_file="edn.db", console_cookie="edn_console")  # an application's


def make_service(data_dir, base: str = BASE) -> Service:
    return Service(ServiceConfig(base_url=base, data_dir=data_dir, admin_token=ADMIN_TOKEN),
                   names=NAMES)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def service(tmp_path, clock):
    service = make_service(tmp_path)
    service.console = console = Console(service, clock=clock)
    service.http_routes.add(PREFIX, console, methods=("GET", "POST"))
    actions = []
    console.add_api("things", lambda call: {"things": [1, 2], "asked": call.params})
    console.add_api("poke", lambda call: actions.append(call.params) or {"message": "poked"},
                    action=True)

    def refuse(call):
        raise ConsoleError(409, "not now")
    console.add_api("refuse", refuse)
    service.actions = actions
    yield service
    service.close()


@pytest.fixture
def client(service):
    return ConsoleClient(service)


def test_the_page_is_served_with_its_files_and_strict_headers(client):
    page = client.get("/console")
    assert page.status == 200 and page.header("Content-Type").startswith("text/html")
    html = page.body.decode()
    for contract in ('id="login-form"', 'name="token"', 'type="submit"', 'id="console"',
                     'id="events-per-second"', 'id="precision"', 'id="hit-ratio"', 'id="cpu"',
                     'id="utilization"', 'id="servers"', 'id="topics"', 'id="dead-letters"',
                     'id="purge-dead-letters"', 'id="logout"', 'id="status"'):
        assert contract in html, contract
    # no inline script: every <script> has a src, served from this console
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script src="/console/static/app.js" defer>']
    assert "http://" not in html.replace(BASE, "") and "https://" not in html  # no CDN
    policy = page.header("Content-Security-Policy")
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "default-src 'none'" in policy
    assert page.header("X-Content-Type-Options") == "nosniff"
    for name, kind in (("app.js", "text/javascript"), ("console.css", "text/css"),
                       ("favicon.svg", "image/svg+xml")):
        asset = client.get(f"/console/static/{name}")
        assert asset.status == 200 and asset.header("Content-Type").startswith(kind)
        assert asset.body and asset.header("Content-Security-Policy") == policy
    assert client.get("/console/").status == 200
    assert client.request("HEAD", "/console").body == b""


def test_only_the_listed_files_are_reachable(client):
    for path in ("/console/static/index.html/../app.py", "/console/static/../app.py",
                 "/console/static/%2e%2e/auth.py", "/console/static/", "/console/static/auth.py",
                 "/console/nothing"):
        answer = client.get(path)
        assert answer.status == 404, path
        assert b"import" not in answer.body
    assert client.request("PUT", "/console").status == 405  # the edge: GET and POST only


def test_a_wrong_token_is_refused_without_a_cookie(client):
    tokens = ("wrong", "", ADMIN_TOKEN + " ", " " + ADMIN_TOKEN, "x" * 5000, 12, None)
    for n, token in enumerate(tokens):
        client.remote_addr = f"10.0.0.{n}"  # one failure per address: no throttling here
        answer = client.post("/console/api/login", {"token": token})
        assert answer.status == 401, token
        assert answer.all_headers("Set-Cookie") == [] and client.cookies == {}
        assert ADMIN_TOKEN.encode() not in answer.body


def test_login_sets_a_strict_http_only_cookie_and_answers_the_csrf_token(client):
    answer = client.login()
    assert answer.status == 200
    (cookie,) = answer.all_headers("Set-Cookie")
    attributes = [part.strip() for part in cookie.split(";")]
    name, value = attributes[0].split("=", 1)
    assert name == "edn_console" and len(value) >= 40
    assert {"HttpOnly", "SameSite=Strict", "Path=/console"} <= set(attributes)
    assert "Secure" not in attributes  # the base URL is http
    document = answer.json()
    assert document["authenticated"] is True and document["csrf"] != value
    assert "things" in document["features"] and ADMIN_TOKEN not in answer.body.decode()
    session = client.get("/console/api/session").json()
    assert session == {"authenticated": True, "role": "source", "csrf": document["csrf"],
                       "features": ["poke", "refuse", "things"]}


def test_the_cookie_is_secure_behind_an_https_base(tmp_path):
    service = make_service(tmp_path, "https://console.example:8443")
    try:
        console_of(service)
        answer = ConsoleClient(service).login()
        assert answer.status == 200 and "Secure" in answer.header("Set-Cookie").split("; ")
    finally:
        service.close()


def test_the_session_answer_without_a_session_is_not_an_error(client):
    answer = client.get("/console/api/session")
    assert answer.status == 200 and answer.json() == {"authenticated": False, "role": "source"}
    assert answer.header("Cache-Control") == "no-store"


def test_apis_need_a_session_and_are_not_cached(client):
    assert client.get("/console/api/things").status == 401
    client.cookies["edn_console"] = "forged-session-id"
    assert client.get("/console/api/things").status == 401
    client.cookies.clear()
    client.login()
    answer = client.get("/console/api/things?limit=3")
    assert answer.status == 200 and answer.json() == {"things": [1, 2], "asked": {"limit": "3"}}
    assert answer.header("Cache-Control") == "no-store"
    assert "frame-ancestors 'none'" in answer.header("Content-Security-Policy")
    refused = client.get("/console/api/refuse")
    assert refused.status == 409 and refused.json() == {"error": "not now"}
    assert client.get("/console/api/unknown").status == 404
    assert client.post("/console/api/things").status == 404  # a read is not an action


def test_oversized_or_malformed_cookies_and_queries_are_bounded(client):
    client.login()
    (session_id,) = client.cookies.values()
    assert client.get("/console/api/things").status == 200
    # a cookie header past its bound is not parsed at all, even with the right session in it
    padded = f"edn_console={session_id}; pad={'x' * 9000}"
    assert client.get("/console/api/things", headers={"Cookie": padded}).status == 401
    assert client.get("/console/api/things",
                      headers={"Cookie": "edn_console=" + "a" * 5000}).status == 401
    assert client.get("/console/api/things", headers={"Cookie": '"\\;=;'}).status == 401
    many = "&".join(f"p{n}={n}" for n in range(100))
    asked = client.get(f"/console/api/things?{many}").json()["asked"]
    assert len(asked) == 20  # the first 20 parameters reach a handler, no more


def test_an_action_needs_the_csrf_token_and_the_same_origin(client, service):
    client.login()
    assert client.post("/console/api/poke", {"n": 1}, csrf=False).status == 403
    assert client.post("/console/api/poke", {"n": 2},
                       headers={"X-CSRF-Token": "guessed"}).status == 403
    for origin in ("http://evil.example", "http://127.0.0.1:8081", "https://127.0.0.1:8080",
                   "null"):
        answer = client.post("/console/api/poke", {"n": 3}, headers={"Origin": origin})
        assert answer.status == 403, origin
    # neither Origin nor Referer: refused; a Referer of this console: accepted
    assert client.post("/console/api/poke", {"n": 4}, headers={"Origin": None}).status == 403
    assert client.post("/console/api/poke", {"n": 5}, headers={
        "Origin": None, "Referer": "http://evil.example/console"}).status == 403
    assert client.post("/console/api/poke", {"n": 6}, headers={
        "Origin": None, "Referer": BASE + "/console"}).status == 200
    assert service.actions == [{"n": 6}]
    # a form (what a cross-site page can send without CORS) or a body that is not an object
    assert client.post("/console/api/poke", raw=b"n=7",
                       content_type="application/x-www-form-urlencoded").status == 415
    assert client.post("/console/api/poke", raw=b"[1]").status == 400
    assert client.post("/console/api/poke", raw=b"{not json").status == 400
    assert client.post("/console/api/poke", raw=b"\xff\xfe").status == 400
    assert client.post("/console/api/poke", {"n": 8}).json() == {"message": "poked"}
    assert service.actions == [{"n": 6}, {"n": 8}]


def test_a_cross_site_login_is_refused(client):
    answer = client.post("/console/api/login", {"token": ADMIN_TOKEN},
                         headers={"Origin": "http://evil.example"})
    assert answer.status == 403 and client.cookies == {}


def test_logout_needs_the_csrf_token_and_ends_the_session_everywhere(client, service):
    client.login()
    stolen = dict(client.cookies)
    assert client.post("/console/api/logout", csrf=False).status == 403
    assert client.get("/console/api/things").status == 200  # the refused logout changed nothing
    answer = client.post("/console/api/logout")
    assert answer.status == 200 and client.cookies == {}
    assert "Max-Age=0" in answer.header("Set-Cookie")
    replay = ConsoleClient(service, cookies=stolen)  # a copy of the cookie is dead too
    assert replay.get("/console/api/things").status == 401
    assert replay.get("/console/api/session").json()["authenticated"] is False


def test_a_login_replaces_a_session_id_set_before_it(client, service):
    client.login()
    before = dict(client.cookies)
    client.login()
    assert client.cookies != before
    assert ConsoleClient(service, cookies=before).get("/console/api/things").status == 401


def test_sessions_expire_when_idle_and_at_their_absolute_limit(client, clock, service):
    client.login()
    sessions = service.console.sessions
    clock.now += sessions.seconds - 10
    assert client.get("/console/api/things").status == 200  # in use: the expiry moves on
    clock.now += sessions.seconds - 10
    assert client.get("/console/api/things").status == 200
    clock.now += sessions.seconds + 1  # idle past its lifetime
    assert client.get("/console/api/things").status == 401

    client.cookies.clear()
    client.login()
    start = clock.now
    while clock.now < start + sessions.max_seconds - sessions.seconds:
        clock.now += sessions.seconds / 2
        assert client.get("/console/api/things").status == 200
    clock.now = start + sessions.max_seconds + 1  # however active, it ends
    assert client.get("/console/api/things").status == 401


def test_failed_logins_are_throttled_per_address(client, clock, service):
    throttle = service.console.throttle
    for _ in range(throttle.free):
        assert client.login("wrong").status == 401
    refused = client.login()  # even the right token waits now
    assert refused.status == 429 and int(refused.header("Retry-After")) >= 1
    other = ConsoleClient(service, remote_addr="10.0.0.2")
    assert other.login().status == 200  # another address is not held back
    clock.now += 2
    assert client.login("wrong").status == 401
    assert client.login().status == 429  # each failure doubles the wait: 2 s now
    clock.now += 1.5
    assert client.login().status == 429
    clock.now += 0.6
    assert client.login().status == 200
    assert throttle.wait("127.0.0.1") == 0  # a success forgets the failures
    assert client.login("wrong").status == 401 and client.login("wrong").status == 401


def test_workers_share_sessions_through_the_store(tmp_path, service, client):
    """Two workers: two services on the same data directory (the same SQLite file)."""
    client.login()
    other = make_service(tmp_path)
    try:
        console = Console(other, clock=service.console.sessions.clock)
        other.http_routes.add(PREFIX, console, methods=("GET", "POST"))
        console.add_api("things", lambda call: {"worker": 2})
        elsewhere = ConsoleClient(other, cookies=dict(client.cookies), csrf=client.csrf)
        assert elsewhere.get("/console/api/things").json() == {"worker": 2}
        assert elsewhere.post("/console/api/logout").status == 200
        assert client.get("/console/api/things").status == 401
    finally:
        other.close()


@pytest.mark.sqlite_only("reads the store file with sqlite3")
def test_the_store_keeps_no_usable_session_id(client, tmp_path):
    client.login()
    (session_id,) = client.cookies.values()
    with sqlite3.connect(tmp_path / "edn.db") as db:
        rows = db.execute("SELECT * FROM console_sessions").fetchall()
    assert len(rows) == 1 and session_id not in repr(rows)


def test_api_names_are_checked_and_unique(service):
    console = service.console
    for bad in ("", "a/b", "../x", "a b"):
        with pytest.raises(ValueError):
            console.add_api(bad, lambda call: {})
    for taken in ("things", "login", "session", "logout"):
        with pytest.raises(ValueError):
            console.add_api(taken, lambda call: {})
    console.add_api("things", lambda call: {}, action=True)  # a read and an action may share
    assert console_of(service) is console


def test_the_page_files_ship_as_package_data():
    """A wheel or an editable install carries the page: pyproject names the static files."""
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    assert "console/static/*" in pyproject["tool"]["setuptools"]["package-data"]["wsframework"]
    static = resources.files("wsframework.console").joinpath("static")
    for name in [*ASSETS, "index.html"]:
        assert static.joinpath(name).read_bytes(), name
