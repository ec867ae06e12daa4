"""TLS for every hop: what a role serves with, what it and the CLI call with.

**Serving** (:class:`ServerTls`, :func:`server_context`): TLS 1.2 and newer only; for TLS 1.2
only forward-secret AEAD suites (ECDHE with AES-GCM or ChaCha20-Poly1305; TLS 1.3's suites
are all of that kind); no compression, no renegotiation, a fresh key share per handshake.
``client_auth`` is ``none`` (no certificate asked), ``optional`` (asked; one that does not
verify against ``ca`` ends the handshake, none at all is allowed) or ``required``.

**Calling** (:class:`ClientTls`, :func:`client_context`): the peer's certificate is verified
against the system's trust store plus ``ca`` (the network's CA), and its name against the
URL's host (a certificate for another name is refused); with ``cert``/``key`` the caller
presents its own certificate (mutual TLS inside the network).

**One identity per process** (:func:`set_process_client_tls`): a role is one member of the
network, so every transport in its process calls with the same CA and certificate; ``edn
serve`` and the CLI set them from ``--tls-ca``/``--tls-cert``/``--tls-key`` before any call,
and :func:`process_client_context` is the context every https call of the process uses.

**Who a peer is** (:func:`peer_principal`): the subject's common name of a verified client
certificate, else its first DNS subject alternative name.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLIENT_AUTH_MODES", "ServerTls", "ClientTls", "TlsConfigError", "server_context",
           "client_context", "peer_principal", "PEER_PRINCIPAL_ENVIRON", "require_member_certificates",
           "member_certificates_required", "set_process_client_tls", "process_client_tls",
           "process_client_context", "certificate_expiry", "TLS12_CIPHERS"]

CLIENT_AUTH_MODES = ("none", "optional", "required")
#: TLS 1.2 suites allowed: ECDHE key exchange (forward secrecy), AEAD encryption
TLS12_CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                 "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                 "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")
_CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A TLS setting that cannot work (a missing file, a key that does not match)."""


@dataclass(frozen=True)
class ServerTls:
    cert: Path
    key: Path
    ca: Path | None = None
    client_auth: str = "none"

    def __post_init__(self):
        if self.client_auth not in CLIENT_AUTH_MODES:
            raise TlsConfigError(f"client auth is one of {', '.join(CLIENT_AUTH_MODES)}, "
                                 f"not {self.client_auth!r}")
        if self.client_auth != "none" and self.ca is None:
            raise TlsConfigError(f"client auth {self.client_auth} needs a CA to verify "
                                 f"client certificates against (--tls-ca)")


@dataclass(frozen=True)
class ClientTls:
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def __post_init__(self):
        if (self.cert is None) != (self.key is None):
            raise TlsConfigError("a client certificate needs its key, and a key its "
                                 "certificate (--tls-cert and --tls-key together)")


def _modern(context: ssl.SSLContext) -> ssl.SSLContext:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= (ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
                        | ssl.OP_SINGLE_ECDH_USE | ssl.OP_CIPHER_SERVER_PREFERENCE)
    return context


def _load_chain(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        context.load_cert_chain(str(cert), str(key))
    except FileNotFoundError as exc:
        raise TlsConfigError(f"no such file: {exc.filename}") from None
    except ssl.SSLError as exc:
        raise TlsConfigError(f"cannot use certificate {cert} with key {key}: "
                             f"{exc.reason or exc}") from None


def _load_ca(context: ssl.SSLContext, ca: Path) -> None:
    try:
        context.load_verify_locations(cafile=str(ca))
    except FileNotFoundError:
        raise TlsConfigError(f"no such file: {ca}") from None
    except ssl.SSLError as exc:
        raise TlsConfigError(f"cannot read CA certificates from {ca}: {exc.reason or exc}") from None


def server_context(tls: ServerTls) -> ssl.SSLContext:
    context = _modern(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    _load_chain(context, tls.cert, tls.key)
    if tls.ca is not None:
        _load_ca(context, tls.ca)
    context.verify_mode = _CERT_REQS[tls.client_auth]
    return context


def client_context(tls: ClientTls | None = None) -> ssl.SSLContext:
    """Verifies the server against the system store plus ``tls.ca``; presents ``tls.cert``."""
    context = _modern(ssl.create_default_context())
    if tls is not None:
        if tls.ca is not None:
            _load_ca(context, tls.ca)
        if tls.cert is not None:
            _load_chain(context, tls.cert, tls.key)
    return context


#: the WSGI environ key under which the server puts the principal of a verified client
#: certificate (edn.gunicorn); the messaging layer carries it as IncomingMessage.peer_principal
PEER_PRINCIPAL_ENVIRON = "wsframework.peer_principal"

_members_present_certificates = False


def require_member_certificates(required: bool) -> None:
    """Whether, in this process, the network credential counts only from a peer that
    presented a certificate the network's CA verified (set by a role serving mutual TLS):
    a stolen token alone then opens nothing."""
    global _members_present_certificates
    _members_present_certificates = bool(required)


def member_certificates_required() -> bool:
    return _members_present_certificates


_process_tls: ClientTls | None = None
_process_context: ssl.SSLContext | None = None


def set_process_client_tls(tls: ClientTls | None) -> None:
    """The CA and certificate every https call of this process uses from now on (checked
    here: a missing file or a key that does not match is a :class:`TlsConfigError`)."""
    global _process_tls, _process_context
    client_context(tls)  # checked, not kept: see process_client_context
    _process_tls, _process_context = tls, None


def process_client_tls() -> ClientTls | None:
    return _process_tls


def process_client_context() -> ssl.SSLContext:
    """The context for this process's https calls (the system store alone until set).
    Made on first use, in the process that uses it: a gunicorn worker under gevent
    patches ``ssl`` after the arbiter forked it, and a context made before the patch
    cannot be configured after it (each setter recurses)."""
    global _process_context
    if _process_context is None:
        _process_context = client_context(_process_tls)
    return _process_context


def peer_principal(peer_cert: dict | None) -> str | None:
    """The principal a verified peer certificate (``SSLSocket.getpeercert()``) names: its
    subject's common name, else its first DNS subject alternative name."""
    if not peer_cert:
        return None
    for rdn in peer_cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and value:
                return value
    for kind, value in peer_cert.get("subjectAltName", ()):
        if kind == "DNS" and value:
            return value
    return None


def certificate_expiry(path: Path) -> float:
    """When the first certificate in the PEM file ``path`` expires (seconds since the epoch)."""
    from cryptography import x509
    try:
        certificate = x509.load_pem_x509_certificate(Path(path).read_bytes())
    except FileNotFoundError:
        raise TlsConfigError(f"no such file: {path}") from None
    except ValueError as exc:
        raise TlsConfigError(f"not a PEM certificate: {path}: {exc}") from None
    return certificate.not_valid_after_utc.timestamp()
