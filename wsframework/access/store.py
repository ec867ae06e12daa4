"""Access tokens and grants, durable in the role's store.

* A **token** belongs to a principal name; it is printed once when made and stored only as
  its SHA-256 digest (a token is 32 random bytes: a fast hash is safe against guessing, and
  the digest alone cannot be used to authenticate). A token made for ``wsse:PasswordDigest``
  is also kept sealed under the role's key file (:mod:`.sealing`): a digest can only be
  checked against the token itself.
* A **grant** gives a principal one permission (:data:`PERMISSIONS`) on the topics a pattern
  matches (``*`` any run of characters, ``?`` one; ``stocks.*``, ``*``).

Workers of one role share the tables; each caches them and reloads when the ``access``
generation moves (every change bumps it).
"""
from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
import threading
import time
from dataclasses import dataclass

from ..commandline import new_token
from ..migrations import columns, migrate
from .sealing import SealBroken, SealKey

__all__ = ["PERMISSIONS", "Grant", "AccessStore", "AccessRefused", "token_digest",
           "MAX_PATTERN", "check_principal", "check_pattern", "check_permission"]

PERMISSIONS = ("publish", "subscribe", "admin")
MAX_PATTERN = 200
MAX_GRANTS = 10_000
MAX_TOKENS = 10_000
MIN_TOKEN = 32  # characters of a token an operator gives (a made one has 43)
_PRINCIPAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")
_PATTERN = re.compile(r"^[A-Za-z0-9._*?/-]+$")
_GENERATION = "access"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS access_tokens (
    name TEXT PRIMARY KEY,
    digest BLOB NOT NULL UNIQUE,
    created REAL NOT NULL,
    sealed BLOB
);
CREATE TABLE IF NOT EXISTS access_grants (
    principal TEXT NOT NULL,
    permission TEXT NOT NULL,
    pattern TEXT NOT NULL,
    PRIMARY KEY (principal, permission, pattern)
);
"""


class AccessRefused(ValueError):
    """A request to the access tables that cannot be taken (a bad name, pattern or
    permission, an unknown token or grant, too many); its text says which."""


@dataclass(frozen=True)
class Grant:
    principal: str
    permission: str
    pattern: str

    def covers(self, topic: str) -> bool:
        return fnmatch.fnmatchcase(topic, self.pattern)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "replace")).digest()


def check_principal(name: str) -> str:
    if not isinstance(name, str) or not _PRINCIPAL.match(name):
        raise AccessRefused("a principal is 1-128 letters, digits, '.', '_', '@' or '-', "
                            f"starting with a letter or digit: {str(name)[:80]!r}")
    return name


def check_pattern(pattern: str) -> str:
    if not isinstance(pattern, str) or not 0 < len(pattern) <= MAX_PATTERN or not _PATTERN.match(pattern):
        raise AccessRefused(f"a topic pattern is 1-{MAX_PATTERN} of letters, digits, "
                            f"'.', '_', '/', '-', '*' and '?': {str(pattern)[:80]!r}")
    return pattern


def check_permission(permission: str) -> str:
    if permission not in PERMISSIONS:
        raise AccessRefused(f"a permission is one of {', '.join(PERMISSIONS)}, "
                            f"not {str(permission)[:40]!r}")
    return permission


def _add_sealed(conn, store) -> None:
    """A table made before sealed tokens existed gets the column."""
    if "sealed" not in columns(conn, "access_tokens"):
        conn.execute("ALTER TABLE access_tokens ADD COLUMN sealed BLOB")


_MIGRATIONS = [_SCHEMA, _add_sealed]


class AccessStore:
    """``seal_key``: the :class:`~.sealing.SealKey` of tokens made for PasswordDigest (None:
    such tokens cannot be made here)."""

    def __init__(self, store, seal_key: SealKey | None = None):
        self.store = store
        self.seal_key = seal_key
        migrate(store, "access", _MIGRATIONS)
        self._lock = threading.Lock()
        self._seen = -1
        self._digests: dict[bytes, str] = {}  # digest -> name (Bearer)
        self._by_name: dict[str, bytes] = {}  # name -> digest (Basic, UsernameToken)
        self._sealed: dict[str, bytes] = {}  # name -> sealed token (PasswordDigest)
        self._grants: dict[str, list[Grant]] = {}

    # -- reading (cached) --------------------------------------------------------------------
    def _load(self) -> None:
        generation = self.store.generation(_GENERATION)
        if generation == self._seen:
            return
        with self._lock:
            if generation == self._seen:
                return
            rows = self.store.query("SELECT name, digest, sealed FROM access_tokens")
            digests = {bytes(row["digest"]): row["name"] for row in rows}
            sealed = {row["name"]: bytes(row["sealed"]) for row in rows if row["sealed"]}
            grants: dict[str, list[Grant]] = {}
            for row in self.store.query("SELECT principal, permission, pattern FROM access_grants"):
                grants.setdefault(row["principal"], []).append(
                    Grant(row["principal"], row["permission"], row["pattern"]))
            self._by_name = {name: digest for digest, name in digests.items()}
            self._digests, self._grants, self._sealed = digests, grants, sealed
            self._seen = generation

    def principal_of_token(self, token: str) -> str | None:
        """The principal a bearer token belongs to, or None."""
        self._load()
        return self._digests.get(token_digest(token))

    def token_matches(self, name: str, token: str) -> bool:
        """Whether ``token`` is ``name``'s (constant time in the token)."""
        self._load()
        digest = self._by_name.get(name)
        return digest is not None and hmac.compare_digest(digest, token_digest(token))

    def password_digest_matches(self, name: str, nonce: bytes, created: str,
                                digest: bytes) -> bool:
        """Whether ``digest`` is ``SHA-1(nonce + created + name's token)`` (constant time);
        false for a name whose token was not made for digests."""
        self._load()
        sealed = self._sealed.get(name)
        if sealed is None or self.seal_key is None:
            return False
        try:
            token = self.seal_key.open(sealed, name)
        except SealBroken:
            return False
        expected = hashlib.sha1(nonce + created.encode("utf-8") + token.encode("utf-8")).digest()
        return hmac.compare_digest(expected, digest)

    def allowed(self, principal: str, permission: str, topic: str) -> bool:
        self._load()
        return any(g.permission == permission and g.covers(topic)
                   for g in self._grants.get(principal, ()))

    def grants(self) -> list[Grant]:
        self._load()
        return sorted((g for gs in self._grants.values() for g in gs),
                      key=lambda g: (g.principal, g.permission, g.pattern))

    def token_names(self) -> list[str]:
        self._load()
        return sorted(self._digests.values())

    def digest_token_names(self) -> list[str]:
        """The names whose token was made for PasswordDigest (kept sealed)."""
        self._load()
        return sorted(self._sealed)

    # -- changes ----------------------------------------------------------------------------
    def create_token(self, name: str, token: str | None = None, *,
                     password_digest: bool = False) -> str:
        """A new token for ``name`` (replacing its old one); returned once, stored as its
        digest, and sealed as well with ``password_digest``. ``token``: the one another role
        made for ``name`` (the same principal across the network's roles), at least
        :data:`MIN_TOKEN` characters."""
        check_principal(name)
        if password_digest and self.seal_key is None:
            raise AccessRefused("this role keeps no key for PasswordDigest tokens")
        if token is None:
            token = new_token(32)
        elif not MIN_TOKEN <= len(token) <= 256 or not token.isascii() or not token.isprintable():
            raise AccessRefused(f"a token given is {MIN_TOKEN}-256 printable ASCII characters")
        with self.store.transaction() as conn:
            count = conn.execute("SELECT COUNT(*) FROM access_tokens WHERE name != ?",
                                 (name,)).fetchone()[0]
            if count >= MAX_TOKENS:
                raise AccessRefused(f"at most {MAX_TOKENS} tokens")
            sealed = self.seal_key.seal(token, name) if password_digest else None
            conn.execute("INSERT INTO access_tokens(name, digest, created, sealed) "
                         "VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                         "digest = excluded.digest, created = excluded.created, "
                         "sealed = excluded.sealed",
                         (name, token_digest(token), time.time(), sealed))
            self.store.bump(conn, _GENERATION)
        return token

    def delete_token(self, name: str) -> None:
        check_principal(name)
        with self.store.transaction() as conn:
            if not conn.execute("DELETE FROM access_tokens WHERE name = ?", (name,)).rowcount:
                raise AccessRefused(f"no token for {name!r}")
            self.store.bump(conn, _GENERATION)

    def grant(self, principal: str, permission: str, pattern: str) -> Grant:
        grant = Grant(check_principal(principal), check_permission(permission),
                      check_pattern(pattern))
        with self.store.transaction() as conn:
            if conn.execute("SELECT COUNT(*) FROM access_grants").fetchone()[0] >= MAX_GRANTS:
                raise AccessRefused(f"at most {MAX_GRANTS} grants")
            conn.execute("INSERT OR IGNORE INTO access_grants(principal, permission, pattern) "
                         "VALUES (?, ?, ?)", (grant.principal, grant.permission, grant.pattern))
            self.store.bump(conn, _GENERATION)
        return grant

    def revoke(self, principal: str, permission: str, pattern: str) -> Grant:
        grant = Grant(check_principal(principal), check_permission(permission),
                      check_pattern(pattern))
        with self.store.transaction() as conn:
            if not conn.execute("DELETE FROM access_grants WHERE principal = ? AND "
                                "permission = ? AND pattern = ?",
                                (grant.principal, grant.permission, grant.pattern)).rowcount:
                raise AccessRefused(f"no such grant: {principal} {permission} {pattern}")
            self.store.bump(conn, _GENERATION)
        return grant
