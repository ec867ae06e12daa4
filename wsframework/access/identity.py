"""Who sent a message: its principal, from the first of

* a client certificate the network's CA verified (its common name, else its first DNS name;
  :attr:`IncomingMessage.peer_principal <wsframework.messaging.IncomingMessage>`);
* ``Authorization: Bearer TOKEN`` (the token's owner) or ``Authorization: Basic``
  ``NAME:TOKEN``;
* a WS-Security 1.0 ``wsse:UsernameToken`` header with the name's token as a
  ``PasswordText`` password, or as a ``PasswordDigest``, ``Base64(SHA-1(nonce + created +
  token))``, for a token made for digests (kept sealed: :mod:`.sealing`). ``Nonce`` and
  ``wsu:Created`` make the token single-use: Created must lie within :data:`REPLAY_WINDOW_S`
  of this host's clock and a nonce is refused the second time within that window. A digest
  needs both (without them it is a fixed value, replayable forever); with text they are
  optional.

A credential that is presented but wrong is refused (:class:`~wsframework.exceptions.
AccessDenied`), never taken for no credential. Every part a peer sends is bounded.
"""
from __future__ import annotations

import base64
import binascii
import datetime
import threading
import time
from collections import OrderedDict

from lxml import etree

from ..exceptions import AccessDenied

__all__ = ["WSSE", "WSU", "PASSWORD_TEXT", "PASSWORD_DIGEST", "REPLAY_WINDOW_S", "MAX_NONCE_BYTES",
           "Identifier", "NonceCache"]

WSSE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
WSU = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
_PROFILE = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0"
PASSWORD_TEXT = _PROFILE + "#PasswordText"
PASSWORD_DIGEST = _PROFILE + "#PasswordDigest"
REPLAY_WINDOW_S = 300.0
MAX_NONCE_BYTES = 64
MAX_CREDENTIAL = 512  # characters of a name, a token or a header value
_MAX_NONCES = 100_000


def _b64decode_either(text: str) -> bytes:
    """Base64 in the standard alphabet, or the URL-safe one (suds encodes Basic that way)."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)


class NonceCache:
    """Nonces seen within the replay window, oldest first; bounded (the oldest go first)."""

    def __init__(self, window: float = REPLAY_WINDOW_S, limit: int = _MAX_NONCES):
        self.window = window
        self.limit = limit
        self._seen: OrderedDict[tuple[str, bytes], float] = OrderedDict()
        self._lock = threading.Lock()

    def first_use(self, name: str, nonce: bytes, now: float) -> bool:
        with self._lock:
            while self._seen and (next(iter(self._seen.values())) < now - self.window
                                  or len(self._seen) >= self.limit):
                self._seen.popitem(last=False)
            key = (name, nonce)
            if key in self._seen:
                return False
            self._seen[key] = now
            return True


def _parse_created(text: str) -> float:
    value = text.strip()
    if len(value) > 40:
        raise ValueError("too long")
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    created = datetime.datetime.fromisoformat(value)
    if created.tzinfo is None:
        raise ValueError("no time zone")
    return created.timestamp()


class Identifier:
    """Finds a message's principal (see the module docstring) against ``tokens``, an
    :class:`~wsframework.access.store.AccessStore`."""

    def __init__(self, tokens, *, clock=time.time, nonces: NonceCache | None = None):
        self.tokens = tokens
        self.clock = clock
        self.nonces = nonces or NonceCache()

    def principal(self, message) -> str | None:
        if message.peer_principal:
            return message.peer_principal
        authorization = message.authorization
        if authorization:
            return self._from_authorization(authorization)
        security = message.header(f"{{{WSSE}}}Security")
        if security is not None:
            return self._from_username_token(security)
        return None

    def _from_authorization(self, value: str) -> str:
        if len(value) > MAX_CREDENTIAL:
            raise AccessDenied("the Authorization header is too long")
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        if scheme.lower() == "bearer" and credential:
            principal = self.tokens.principal_of_token(credential)
            if principal is None:
                raise AccessDenied("unknown bearer token")
            return principal
        if scheme.lower() == "basic" and credential:
            try:
                name, _, token = _b64decode_either(credential).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise AccessDenied("malformed Basic credentials") from None
            if name and self.tokens.token_matches(name, token):
                return name
            raise AccessDenied("wrong name or token (Basic)")
        raise AccessDenied("the Authorization scheme is Bearer TOKEN or Basic NAME:TOKEN")

    def _from_username_token(self, security: etree._Element) -> str:
        token = security.find(f"{{{WSSE}}}UsernameToken")
        if token is None:
            raise AccessDenied("wsse:Security without a wsse:UsernameToken")
        name = (token.findtext(f"{{{WSSE}}}Username") or "").strip()
        password = token.find(f"{{{WSSE}}}Password")
        if not name or password is None or len(name) > MAX_CREDENTIAL:
            raise AccessDenied("a wsse:UsernameToken needs a Username and a Password")
        kind = password.get("Type", PASSWORD_TEXT)
        if kind not in (PASSWORD_TEXT, PASSWORD_DIGEST):
            raise AccessDenied("unknown wsse:Password Type")
        secret = password.text or ""
        if len(secret) > MAX_CREDENTIAL:
            raise AccessDenied("the wsse:Password is too long")
        nonce = self._fresh_nonce(token)
        if kind == PASSWORD_DIGEST:
            if nonce is None:
                raise AccessDenied("a PasswordDigest needs a wsse:Nonce and a wsu:Created")
            right = self._digest_matches(name, nonce, token, secret)
        else:
            right = self.tokens.token_matches(name, secret)
        if not right:
            raise AccessDenied("wrong name or token (wsse:UsernameToken)")
        # recorded only once the token is right: nobody else can spend a member's nonces
        if nonce is not None and not self.nonces.first_use(name, nonce, self.clock()):
            raise AccessDenied("this wsse:Nonce was used already (a replay)")
        return name

    def _digest_matches(self, name: str, nonce: bytes, token: etree._Element,
                        digest_text: str) -> bool:
        try:
            digest = base64.b64decode(digest_text.strip(), validate=True)
        except binascii.Error:
            raise AccessDenied("a PasswordDigest is base64") from None
        # the digest covers wsu:Created exactly as sent
        created = token.findtext(f"{{{WSU}}}Created") or ""
        return self.tokens.password_digest_matches(name, nonce, created, digest)

    def _fresh_nonce(self, token: etree._Element) -> bytes | None:
        """The token's nonce, once its Created is checked (None: neither was sent)."""
        nonce_text = token.findtext(f"{{{WSSE}}}Nonce")
        created_text = token.findtext(f"{{{WSU}}}Created")
        if nonce_text is None and created_text is None:
            return None
        if nonce_text is None or created_text is None:
            raise AccessDenied("a wsse:Nonce needs a wsu:Created, and a wsu:Created a wsse:Nonce")
        if len(nonce_text) > 4 * MAX_NONCE_BYTES // 3 + 4:
            raise AccessDenied(f"the wsse:Nonce is longer than {MAX_NONCE_BYTES} bytes")
        try:
            nonce = base64.b64decode(nonce_text.strip(), validate=True)
            created = _parse_created(created_text)
        except (binascii.Error, ValueError):
            raise AccessDenied("malformed wsse:Nonce or wsu:Created") from None
        if not nonce or len(nonce) > MAX_NONCE_BYTES:
            raise AccessDenied(f"a wsse:Nonce is 1-{MAX_NONCE_BYTES} bytes")
        if abs(self.clock() - created) > REPLAY_WINDOW_S:
            raise AccessDenied(f"wsu:Created is more than {REPLAY_WINDOW_S:.0f} s from this "
                               f"host's clock (stale or from the future)")
        return nonce
