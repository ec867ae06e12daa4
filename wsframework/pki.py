"""A certificate authority small enough to run a network on (``edn tls init``, ``edn tls
issue``), through the ``cryptography`` package.

* :func:`init_ca` makes a self-signed CA: ``DIR/ca.pem`` (the certificate every member and
  client trusts, given as ``--tls-ca``) and ``DIR/ca-key.pem`` beside it, mode 0600. An
  existing CA is never overwritten.
* :func:`issue` signs a member's certificate: ``NAME.pem`` (the certificate, then the CA's,
  so a peer that knows only the CA can verify the chain) and ``NAME-key.pem`` (mode 0600),
  ECDSA P-256, valid for both server and client authentication (every member of the network
  is both: it serves and it calls its peers). Its subject's common name is ``NAME``, the
  principal it acts as; its subject alternative names are the host names and addresses
  peers reach it at (``DNS:host``, ``IP:addr``), plus ``NAME`` itself as a DNS name.

Keys are written with ``os.open(..., 0o600)`` so no other user can read them even for the
instant before a ``chmod``.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA_CERT", "CA_KEY", "PkiError", "Issued", "init_ca", "issue", "parse_san",
           "DEFAULT_CA_DAYS", "DEFAULT_DAYS"]

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
DEFAULT_CA_DAYS = 3650
DEFAULT_DAYS = 397  # the longest a public CA may issue a server certificate for
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_CLOCK_SKEW = datetime.timedelta(minutes=5)  # valid from a little before now


class PkiError(ValueError):
    """A request the CA refuses (a bad name or SAN, a missing or existing file)."""


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise PkiError(f"a certificate name is 1-63 letters, digits, '.', '_' or '-', "
                       f"starting with a letter or digit: {name[:80]!r}")


def parse_san(text: str) -> x509.GeneralName:
    """``DNS:host`` or ``IP:address`` as a subject alternative name."""
    kind, _, value = text.partition(":")
    kind = kind.strip().upper()
    value = value.strip()
    if kind == "IP":
        try:
            return x509.IPAddress(ipaddress.ip_address(value))
        except ValueError:
            raise PkiError(f"not an IP address: {value[:80]!r}") from None
    if kind == "DNS":
        labels = value.split(".")
        if (not value or len(value) > 253
                or not all(re.fullmatch(r"(\*|[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)",
                                        label) for label in labels)
                or "*" in labels[1:]):
            raise PkiError(f"not a DNS name: {value[:80]!r}")
        return x509.DNSName(value)
    raise PkiError(f"a subject alternative name is DNS:name or IP:address, not {text[:80]!r}")


def init_ca(directory: str | Path, *, name: str = "edn network CA",
            days: int = DEFAULT_CA_DAYS) -> Path:
    """A new CA in ``directory`` (made if missing); the path of its certificate."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    for path in (cert_path, key_path):
        if path.exists():
            raise PkiError(f"{path} exists: a CA is never overwritten (remove it first)")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name[:64])])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject).issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256()))
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return cert_path


def _load_ca(directory: Path):
    try:
        certificate = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
        key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), None)
    except FileNotFoundError as exc:
        raise PkiError(f"no CA in {directory}: {exc.filename} is missing "
                       f"(edn tls init {directory} makes one)") from None
    return certificate, key


def issue(name: str, ca_dir: str | Path, out_dir: str | Path, *, sans: list[str] = (),
          days: int = DEFAULT_DAYS, not_before: datetime.datetime | None = None) -> Issued:
    """``NAME.pem`` and ``NAME-key.pem`` in ``out_dir``, signed by the CA in ``ca_dir``.
    ``not_before`` (tests): when the certificate becomes valid, default now."""
    _check_name(name)
    if not 1 <= days <= 36500:
        raise PkiError(f"days must be 1-36500, not {days}")
    names = [parse_san(text) for text in sans]
    ca_certificate, ca_key = _load_ca(Path(ca_dir))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out_dir / f"{name}.pem", out_dir / f"{name}-key.pem"
    for path in (cert_path, key_path):
        if path.exists():
            raise PkiError(f"{path} exists: remove it to issue {name} again")
    if x509.DNSName(name) not in names:
        names.append(x509.DNSName(name))
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or datetime.datetime.now(datetime.timezone.utc) - _CLOCK_SKEW
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                     content_commitment=False, data_encipherment=False,
                                     key_agreement=True, key_cert_sign=False, crl_sign=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256()))
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM)
                          + ca_certificate.public_bytes(serialization.Encoding.PEM))
    return Issued(cert_path, key_path)
