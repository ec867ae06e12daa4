"""Console sessions and login throttling, kept in the role's SQLite store.

Why the store and not a signed cookie: a role may run several gunicorn workers, so a session
must be visible to every worker; an HMAC-signed cookie would be too, but it cannot be revoked
(a logout only asks the browser to forget it, and a copied cookie stays valid until it
expires). A row in the store ends everywhere at once on logout, and the failed-login counts
that throttle a guesser are shared by every worker in the same way.

The cookie carries 32 random bytes (URL-safe); the store keeps only their SHA-256, so
reading the database does not hand out live sessions. Each session has its own CSRF token,
given to the page's script (not in a cookie) and sent back in a header on every action.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from ..migrations import migrate

__all__ = ["Session", "SessionStore", "LoginThrottle"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS console_sessions (
    digest TEXT PRIMARY KEY, csrf TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS console_login_failures (
    address TEXT PRIMARY KEY, failures INTEGER NOT NULL, last REAL NOT NULL);
"""

SESSION_SECONDS = 8 * 3600.0  # idle lifetime: each use moves the expiry this far ahead
MAX_SESSION_SECONDS = 24 * 3600.0  # absolute lifetime, however active the session
MAX_SESSIONS = 1000  # the oldest go first beyond this: a flood of logins cannot fill the disk
MAX_THROTTLED = 10_000  # addresses with failures remembered (the oldest forgotten first)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class Session:
    csrf: str
    expires: float

    def csrf_matches(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(token.encode("utf-8", "replace"),
                                                   self.csrf.encode())


class SessionStore:
    def __init__(self, store, *, seconds: float = SESSION_SECONDS,
                 max_seconds: float = MAX_SESSION_SECONDS, clock=time.time):
        self.store = store
        self.seconds = seconds
        self.max_seconds = max_seconds
        self.clock = clock
        migrate(store, "console", [_SCHEMA])

    def create(self) -> tuple[str, Session]:
        """A new session: its id (for the cookie only) and its record."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), now + self.seconds)
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM console_sessions WHERE expires <= ?", (now,))
            conn.execute("INSERT INTO console_sessions(digest, csrf, created, expires) "
                         "VALUES (?, ?, ?, ?)", (_digest(session_id), session.csrf, now,
                                                 session.expires))
            conn.execute("DELETE FROM console_sessions WHERE digest NOT IN (SELECT digest "
                         "FROM console_sessions ORDER BY created DESC LIMIT ?)", (MAX_SESSIONS,))
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (its idle expiry moved ahead), else None."""
        if not session_id or len(session_id) > 100:
            return None
        digest, now = _digest(session_id), self.clock()
        rows = self.store.query("SELECT csrf, created, expires FROM console_sessions "
                                "WHERE digest = ?", (digest,))
        if not rows or rows[0]["expires"] <= now:
            return None
        row = rows[0]
        expires = min(now + self.seconds, row["created"] + self.max_seconds)
        if expires - row["expires"] > 60:  # at most one write a minute per session
            with self.store.transaction() as conn:
                conn.execute("UPDATE console_sessions SET expires = ? WHERE digest = ?",
                             (expires, digest))
        else:
            expires = row["expires"]
        return Session(row["csrf"], expires)

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self.store.transaction() as conn:
                conn.execute("DELETE FROM console_sessions WHERE digest = ?",
                             (_digest(session_id),))


class LoginThrottle:
    """Failed logins per remote address: ``free`` failures are answered at once; after that
    each further attempt must wait ``base * 2**(extra failures)`` seconds (at most ``cap``)
    from the last failure, and one made earlier is refused unchecked. A success forgets the
    address; failures older than ``forget`` seconds are forgotten."""

    def __init__(self, store, *, free: int = 5, base: float = 1.0, cap: float = 300.0,
                 forget: float = 3600.0, clock=time.time):
        self.store = store
        self.free, self.base, self.cap, self.forget = free, base, cap, forget
        self.clock = clock
        migrate(store, "console", [_SCHEMA])

    def wait(self, address: str | None) -> float:
        """Seconds ``address`` must still wait before its next attempt (0: may try now)."""
        rows = self.store.query("SELECT failures, last FROM console_login_failures "
                                "WHERE address = ?", (address or "",))
        if not rows or rows[0]["failures"] < self.free:
            return 0.0
        failures, last = rows[0]["failures"], rows[0]["last"]
        delay = min(self.cap, self.base * 2 ** min(failures - self.free, 30))
        return max(0.0, last + delay - self.clock())

    def failed(self, address: str | None) -> None:
        now = self.clock()
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM console_login_failures WHERE last < ?", (now - self.forget,))
            conn.execute("INSERT INTO console_login_failures(address, failures, last) "
                         "VALUES (?, 1, ?) ON CONFLICT(address) DO UPDATE SET "
                         "failures = console_login_failures.failures + 1, last = excluded.last", (address or "", now))
            conn.execute("DELETE FROM console_login_failures WHERE address NOT IN (SELECT "
                         "address FROM console_login_failures ORDER BY last DESC LIMIT ?)",
                         (MAX_THROTTLED,))

    def succeeded(self, address: str | None) -> None:
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM console_login_failures WHERE address = ?", (address or "",))
