"""The WS-Eventing WSDL documents of the event source, for both versions.

The documents (``eventing-2011.wsdl``, ``eventing-2004.wsdl``) are hand-written after each
spec's WSDL and self-contained (their WS-Addressing types are inline, so clients such as
zeep load them without network access). What this module adds per request is the
``wsdl:service`` element with SOAP 1.1 and 1.2 ports whose ``soap:address`` is the address
asked about:

* ``{base}/topics/T?wsdl`` -- service ``EventSource`` (port type EventSource: Subscribe);
* ``{base}/subscriptions?wsdl`` -- service ``SubscriptionManager`` (Renew, GetStatus,
  Unsubscribe).

The 2011 Recommendation's document is the default; ``?wsdl&version=2004`` serves the
2004/08 submission's.
"""
from __future__ import annotations

import functools
from pathlib import Path

from lxml import etree

from wsframework import ns

__all__ = ["eventing_wsdl", "serve_eventing_wsdl", "SOURCE", "MANAGER"]

SOURCE = "EventSource"
MANAGER = "SubscriptionManager"
_FILES = {"2011": "eventing-2011.wsdl", "2004": "eventing-2004.wsdl"}
_HERE = Path(__file__).resolve().parent


@functools.lru_cache(maxsize=None)
def _template(version: str) -> bytes:
    return (_HERE / _FILES[version]).read_bytes()


@functools.lru_cache(maxsize=256)
def eventing_wsdl(version: str, kind: str, address: str) -> bytes:
    """The WSDL of ``version`` ('2011' or '2004') for the ``kind`` (:data:`SOURCE` or
    :data:`MANAGER`) endpoint at ``address``."""
    if version not in _FILES:
        raise ValueError(f"unknown WS-Eventing version {version!r}")
    if kind not in (SOURCE, MANAGER):
        raise ValueError(f"unknown endpoint kind {kind!r}")
    root = etree.fromstring(_template(version), etree.XMLParser(remove_blank_text=False,
                                                                resolve_entities=False,
                                                                no_network=True))
    service = etree.SubElement(root, ns.qname(ns.WSDL11, "service"), name=kind)
    for soap_ns, suffix in ((ns.WSDL11_SOAP11, "Soap11"), (ns.WSDL11_SOAP12, "Soap12")):
        port = etree.SubElement(service, ns.qname(ns.WSDL11, "port"), name=f"{kind}{suffix}Port",
                                binding=f"wse:{kind}{suffix}Binding")
        etree.SubElement(port, ns.qname(soap_ns, "address"), location=address)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def _version(query) -> str | None:
    requested = (query or {}).get("version", ["2011"])
    value = (requested[0] if requested else "2011").strip()
    if value in ("2011", "2011/03", "w3c"):
        return "2011"
    if value in ("2004", "2004/08", "submission"):
        return "2004"
    return None


def serve_eventing_wsdl(service) -> None:
    """Serve the documents at ``service``'s topic and subscription-manager addresses (the
    event source roles call this)."""
    topics = service.topics

    def topic_wsdl(path, address, query=None):
        version = _version(query)
        name = topics.name_from_path(path)
        if version is None or not name or name not in topics:
            return None
        return eventing_wsdl(version, SOURCE, address)

    def manager_wsdl(path, address, query=None):
        version = _version(query)
        if version is None or path.rstrip("/") != "/subscriptions":
            return None
        return eventing_wsdl(version, MANAGER, address)

    service.add_wsdl("/topics", topic_wsdl, with_query=True)
    service.add_wsdl("/subscriptions", manager_wsdl, with_query=True)
