"""Tokens kept recoverable, for ``wsse:PasswordDigest``: sealed with AES-256-GCM under a key
file of the role, not the digest-only form every other token has.

A PasswordDigest is ``Base64(SHA-1(nonce + created + password))``: checking it needs the
password itself, so a token made for digests (``edn access token create NAME
--password-digest``) is stored sealed. The key lives in its own file beside the store
(mode 0600, made on first use), so a copy of the database alone (a backup, a dump) still
yields no usable token. The token's name is the associated data: a sealed token moved to
another name does not open.
"""
from __future__ import annotations

import os
import secrets
import threading
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["SealKey", "SealBroken"]

_KEY_BYTES = 32
_NONCE_BYTES = 12


class SealBroken(ValueError):
    """A sealed token that does not open under this key (another key, or altered)."""


class SealKey:
    """The key at ``path``, read (or made, once, by whichever worker comes first) when first
    needed."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._aead: AESGCM | None = None
        self._lock = threading.Lock()

    def seal(self, token: str, name: str) -> bytes:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return nonce + self._cipher().encrypt(nonce, token.encode("utf-8"), name.encode("utf-8"))

    def open(self, sealed: bytes, name: str) -> str:
        try:
            plain = self._cipher().decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:],
                                           name.encode("utf-8"))
        except InvalidTag:
            raise SealBroken(f"the sealed token of {name!r} does not open with {self.path}") from None
        return plain.decode("utf-8")

    def _cipher(self) -> AESGCM:
        with self._lock:
            if self._aead is None:
                self._aead = AESGCM(self._load_or_make())
            return self._aead

    def _load_or_make(self) -> bytes:
        """Read the key; or write a new one to a private temporary file and link it into
        place, which either wins whole or finds another worker's whole key there."""
        if not self.path.exists():
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(descriptor, secrets.token_bytes(_KEY_BYTES))
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
            try:
                os.link(temporary, self.path)
                _sync_directory(self.path.parent)
            except FileExistsError:
                pass  # another worker's key came first: use it
            finally:
                temporary.unlink()
        key = self.path.read_bytes()
        if len(key) != _KEY_BYTES:
            raise SealBroken(f"{self.path} is not a {_KEY_BYTES}-byte key")
        return key


def _sync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
