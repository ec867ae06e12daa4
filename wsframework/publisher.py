"""Publishing an event document to a topic address."""
from __future__ import annotations

from lxml import etree

from . import ns
from .client import SoapClient
from .soap import SoapVersion

PUBLISH_ACTION = ns.FRAMEWORK + ":eventing/Publish"


def topic_address(base_url: str, topic: str) -> str:
    return f"{base_url.rstrip('/')}/topics/{topic.strip('/')}"


def publish(base_url: str, topic: str, event: etree._Element, *, soap11: bool = False,
            client: SoapClient | None = None) -> int:
    client = client or SoapClient(soap_version=SoapVersion.SOAP11 if soap11 else SoapVersion.SOAP12)
    return client.send(topic_address(base_url, topic), PUBLISH_ACTION, event)
