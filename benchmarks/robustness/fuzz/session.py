"""The fuzz's seed messages: a valid session against every role, recorded message by message
(:func:`record_seeds`, through the :class:`Recorder` transport), each kept as a
:class:`Message` that the mutations of :mod:`.mutations` rewrite."""
from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

#: the admin credential of the processes the fuzz starts
TOKEN = "fuzz-bench-token"
Q = "urn:quotes"


@dataclass(frozen=True)
class Message:
    """One HTTP POST of a SOAP message to a process (``target``: a key of the processes)."""

    target: str
    path: str
    content_type: str
    soap_action: str | None
    body: bytes
    kind: str                # subscribe, renew, getstatus, unsubscribe, publish, admin, ...
    mutation: str = "seed"   # how it was fuzzed ("seed": sent as recorded)
    headers: tuple = ()      # extra or replacing HTTP headers (name, value)

    @property
    def malformed(self) -> bool:
        return self.mutation != "seed"

    def http_headers(self) -> dict[str, str]:
        from wsframework.transport.base import soap_http_headers
        headers = soap_http_headers(self.content_type, self.soap_action)
        for name, value in self.headers:
            if value is None:
                headers.pop(name, None)
            else:
                headers[name] = value
        return headers


def _kind_of(action: str | None, path: str) -> str:
    if path.rstrip("/").endswith("/admin"):
        local = (action or "").rsplit("/", 1)[-1]
        return "edn-wire" if local in _EDN_WIRE else "admin"
    local = (action or "").rsplit("/", 1)[-1]
    return {"Subscribe": "subscribe", "Renew": "renew", "GetStatus": "getstatus",
            "Unsubscribe": "unsubscribe", "EventBatch": "event-batch"}.get(local, "publish")


_EDN_WIRE = {"UpdateSummary", "PeerUpdate", "ExportSubscriptions", "ImportSubscriptions",
             "RegisterServer", "ListServers", "ListRoutes", "MoveSubscriptions", "Repartition",
             "ExportBoxes", "GetRecording"}


class Recorder:
    """A transport that records every message it carries (as a :class:`Message` of the
    process whose base URL the address starts with) and passes it on."""

    def __init__(self, inner, bases: dict[str, str]):
        self.inner = inner
        self.bases = {base.rstrip("/"): name for base, name in bases.items()}
        self.messages: list[Message] = []

    def post(self, url, payload, content_type, soap_action=None):
        for base, name in sorted(self.bases.items(), key=lambda item: -len(item[0])):
            if url == base or url.startswith(base + "/"):
                path = url[len(base):] or "/"
                self.messages.append(Message(name, path, content_type, soap_action, payload,
                                             _kind_of(soap_action, path)))
                break
        return self.inner.post(url, payload, content_type, soap_action)

    def close(self):
        self.inner.close()


def quote_event(price, symbol: str = "ACME") -> etree._Element:
    return etree.fromstring(f'<q:quote xmlns:q="{Q}" symbol="{symbol}"><q:symbol>{symbol}'
                            f'</q:symbol><q:price>{price}</q:price></q:quote>')


def record_seeds(transport, *, token: str, sink_url: str, source: str | None = None,
                 servers: dict[str, str] | None = None, dispatcher: str | None = None,
                 grid_topic: str | None = "grid", d: int = 3) -> list[Message]:
    """A valid session against the given base URLs, recorded. ``source`` gets the topics
    ``stocks`` (XPath matcher) and ``boxes`` (R-tree engine); the servers' ``grid_topic`` must
    exist (created through the dispatcher)."""
    from matchers.vocabulary import MATCHER_RTREE_ENGINE, RANGES_DIALECT
    from route_manager import protocol
    from route_manager.protocol import EVENT_BATCH_ACTION
    from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
    from subscription_manager.client import EventingClient
    from wsframework import ns
    from wsframework.admin import AdminClient, contracts
    from wsframework.client import SoapClient
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.soap import SoapVersion

    servers = servers or {}
    bases = {url: name for name, url in servers.items()}
    if source:
        bases[source] = "source"
    if dispatcher:
        bases[dispatcher] = "dispatcher"
    rec = Recorder(transport, bases)

    def soft(call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except Exception:  # a seed that is refused is still a seed
            return None

    def session(client, topic_url, notify, **options):
        handle = soft(client.subscribe, topic_url, notify, **options)
        if handle is not None:
            soft(client.get_status, handle)
            soft(client.renew, handle, "PT2H")
        return handle

    lo, hi = [1.0] * d, [6.0] * d
    point = [3.0] * d
    if source:
        admin = AdminClient(source, token, transport=rec)
        soft(admin.create_topic, "stocks")
        soft(admin.create_topic, "boxes", MATCHER_RTREE_ENGINE, schema_element(d))
        soft(admin.list_topics)
        soft(admin.call, contracts.GetStats())
        stocks, boxes = f"{source}/topics/stocks", f"{source}/topics/boxes"
        cases = [
            ("2011", SoapVersion.SOAP12, stocks, {"filter": "q:price > 10", "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH10_DIALECT_2011}),
            ("2004", SoapVersion.SOAP11, stocks, {"filter": "//q:quote[q:price > 10]",
                                                  "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH10_DIALECT_2004}),
            ("2011", SoapVersion.SOAP12, stocks, {"filter": "q:price > 10 and q:symbol = 'ACME'",
                                                  "namespaces": {"q": Q},
                                                  "dialect": ns.XPATH20_DIALECT_2011}),
            ("2011", SoapVersion.SOAP11, stocks, {"filter": f"{PUBLISH_ACTION} urn:other",
                                                  "dialect": ns.ACTION_DIALECT_DPWS11}),
            ("2004", SoapVersion.SOAP12, stocks, {"filter": PUBLISH_ACTION,
                                                  "dialect": ns.ACTION_DIALECT_DPWS2006}),
            ("2011", SoapVersion.SOAP12, boxes, {"filter": range_filter(lo, hi),
                                                 "dialect": RANGES_DIALECT}),
            ("2004", SoapVersion.SOAP12, boxes, {"filter": range_filter(lo, hi),
                                                 "dialect": RANGES_DIALECT}),
            ("2011", SoapVersion.SOAP12, stocks, {"expires": "2099-01-01T00:00:00Z"}),
            ("2004", SoapVersion.SOAP11, stocks, {"expires": "P1DT2H", "end_to": sink_url + "/end"}),
        ]
        handles = []
        for k, (version, soap, url, options) in enumerate(cases):
            client = EventingClient(version, transport=rec, soap_version=soap)
            options.setdefault("expires", "PT1H")
            handles.append((client, session(client, url, f"{sink_url}/fuzz/seed{k}", **options)))
        publisher = SoapClient(rec)
        soft(publisher.send, stocks, PUBLISH_ACTION, quote_event(42))
        soft(SoapClient(rec, soap_version=SoapVersion.SOAP11).send, stocks, PUBLISH_ACTION,
             quote_event(7, "GE"))
        soft(publisher.send, boxes, PUBLISH_ACTION, event_element(point, 1))
        client, handle = handles[0]
        if handle is not None:
            soft(client.unsubscribe, handle)
    for name, url in servers.items():
        admin = AdminClient(url, token, transport=rec)
        soft(admin.list_topics)
        soft(admin.call, contracts.GetStats())
        soft(admin.call, protocol.ExportSubscriptions(Topic=grid_topic))
        soft(admin.call, protocol.ExportBoxes(Topic=grid_topic, Max=50))
        soft(admin.call, protocol.PeerUpdate(Server="fuzz-peer", Address="http://127.0.0.1:9/",
                                             Route=grid_topic, Load=3))
        for k, version in enumerate(("2011", "2004")):
            client = EventingClient(version, transport=rec)
            handle = session(client, f"{url}/topics/{grid_topic}", f"{sink_url}/fuzz/{name}-{k}",
                             filter=range_filter(lo, hi), dialect=RANGES_DIALECT,
                             expires="PT1H")
            if handle is not None and k:
                soft(client.unsubscribe, handle)
        # as the dispatcher sends it, with the network's credential
        credential = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ns.ADMIN})
        credential.text = token
        soft(SoapClient(rec).send, f"{url}/topics/{grid_topic}", EVENT_BATCH_ACTION,
             _batch(grid_topic, [point, hi], ns), [credential])
    if dispatcher:
        admin = AdminClient(dispatcher, token, transport=rec)
        soft(admin.call, contracts.GetStats())
        soft(admin.call, protocol.ListServers())
        soft(admin.call, protocol.GetRecording(Max=10))
        soft(admin.call, protocol.ListRoutes())
        soft(admin.call, protocol.UpdateSummary(Server="fuzz-peer", Route=grid_topic,
                                                Generation=1, Load=1,
                                                Summary=etree.Element(protocol.SUMMARY)))
        publisher = SoapClient(rec)
        soft(publisher.send, f"{dispatcher}/topics/{grid_topic}", PUBLISH_ACTION,
             event_element(point, 2))
        soft(publisher.send, f"{dispatcher}/topics/{grid_topic}", PUBLISH_ACTION,
             _batch(grid_topic, [point, lo], ns))
    return rec.messages


def _batch(topic: str, points, ns) -> etree._Element:
    from matchers.vocabulary import EDN
    from route_manager.protocol import EVENT_BATCH
    from route_manager.workloads.grid_xml import event_element
    body = etree.Element(EVENT_BATCH, nsmap={"edn": EDN})
    body.set("Topic", topic)
    for k, p in enumerate(points):
        body.append(event_element(p, 100 + k))
    return body
