"""The messaging layer: dispatch on filters over the message, faults at the boundary, and
replies on the back channel or through the injected transport."""

import threading

import pytest
from lxml import etree

from wsframework import addressing as wsa_module
from wsframework import ns
from wsframework.addressing import AddressingHeaders, EndpointReference, WsaVersion, request_headers
from wsframework.exceptions import RECEIVER, SENDER, VERSION_MISMATCH, sender_fault
from wsframework.messaging import MessageFilter, MessagingLayer, Outcome, Reply
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.transport import InProcessTransport, TransportResponse
from wsframework.urlpolicy import UrlPolicy

BASE = "http://svc.example/base"
PINNED_ID = "urn:uuid:22222222-2222-2222-2222-222222222222"
REQUEST_ID = "urn:uuid:33333333-3333-3333-3333-333333333333"
Q = "urn:quotes"


@pytest.fixture(autouse=True)
def pinned_message_ids(monkeypatch):
    monkeypatch.setattr(wsa_module, "new_message_id", lambda: PINNED_ID)


@pytest.fixture
def layer():
    layer = MessagingLayer()
    yield layer
    layer.close()


def quote(price="42"):
    element = etree.Element("{%s}quote" % Q, nsmap={"q": Q})
    etree.SubElement(element, "{%s}price" % Q).text = price
    return element


def request(action=None, *, to=None, body=None, soap=SoapVersion.SOAP12, wsa=WsaVersion.WSA10,
            reply_to=None, fault_to=None, extra=()):
    """A request envelope; without ``action`` and ``to`` it carries no addressing at all."""
    headers = []
    if action is not None or to is not None:
        headers = AddressingHeaders(wsa, action=action, to=to, message_id=REQUEST_ID,
                                    reply_to=reply_to, fault_to=fault_to).to_elements()
    return build_envelope(soap, body, headers + list(extra))


def recorder(name, log, action="urn:reply"):
    def handler(message):
        log.append((name, message))
        return Reply(action, quote())
    return handler


def fault_of(outcome: Outcome):
    return parse_envelope(outcome.body).fault()


# --- MessageFilter ----------------------------------------------------------------------

def test_message_filter_expressions():
    assert MessageFilter().xpath() == "true()"
    assert MessageFilter(action="urn:a").xpath() == "$action = 'urn:a'"
    assert MessageFilter(action="urn:a", path="/p", path_prefix="/t/").xpath() == \
        "$action = 'urn:a' and $path = '/p' and starts-with($path, '/t/')"
    assert MessageFilter(action="it's").xpath() == '$action = "it\'s"'
    assert MessageFilter(action="""a'b"c""").xpath() == """$action = concat('a', "'", 'b"c')"""


@pytest.mark.parametrize("action", ["it's", 'say "hi"', """both ' and "!"""])
def test_quoted_actions_dispatch(layer, action):
    log = []
    layer.route("q", MessageFilter(action=action), recorder("q", log))
    assert layer.handle(request(action)).status == 200
    assert log[0][1].action == action


# --- dispatch -----------------------------------------------------------------------

def test_dispatch_by_action_path_and_prefix(layer):
    log = []
    layer.route("by-action", MessageFilter(action="urn:a"), recorder("by-action", log))
    layer.route("by-path", MessageFilter(path="/admin"), recorder("by-path", log))
    layer.route("by-prefix", MessageFilter(path_prefix="/topics/"), recorder("by-prefix", log))
    layer.handle(request("urn:a"), path="/elsewhere")
    layer.handle(request("urn:other"), path="/admin")
    layer.handle(request("urn:other"), path="/topics/stocks/nyse")
    assert [name for name, _ in log] == ["by-action", "by-path", "by-prefix"]
    assert log[2][1].path == "/topics/stocks/nyse"


def test_dispatch_on_body_element_with_raw_xpath(layer):
    log = []
    layer.route("quotes", "/env:Envelope/env:Body/q:quote[q:price > 30]", recorder("quotes", log),
                namespaces={"env": ns.SOAP12, "q": Q})
    layer.route("anything", MessageFilter(), recorder("anything", log), priority=-1)
    layer.handle(request("urn:x", body=quote("42")))
    layer.handle(request("urn:x", body=quote("10")))
    layer.handle(request("urn:x", body=etree.Element("{urn:other}quote")))
    assert [name for name, _ in log] == ["quotes", "anything", "anything"]


def test_xpath_sees_to_variable_and_headers(layer):
    log = []
    layer.route("to", "$to = 'urn:logical' and /*/*/app:Key = 'k'", recorder("to", log),
                namespaces={"app": "urn:app"})
    key = etree.Element("{urn:app}Key")
    key.text = "k"
    assert layer.handle(request("urn:a", to="urn:logical", extra=[key])).status == 200
    assert log and log[0][1].addressing.to == "urn:logical"
    assert log[0][1].path == "/"  # a non-http To leaves the transport path alone


def test_highest_priority_wins_then_first_registered(layer):
    log = []
    layer.route("low", MessageFilter(), recorder("low", log), priority=-5)
    layer.route("first", MessageFilter(path_prefix="/t"), recorder("first", log), priority=3)
    layer.route("second", MessageFilter(path_prefix="/t"), recorder("second", log), priority=3)
    layer.route("lower", MessageFilter(path="/t/x"), recorder("lower", log), priority=1)
    layer.handle(request("urn:a"), path="/t/x")
    layer.handle(request("urn:a"), path="/u")
    assert [name for name, _ in log] == ["first", "low"]


def test_registration_order_survives_unroute(layer):
    log = []
    layer.route("a", MessageFilter(), recorder("a", log))
    layer.route("b", MessageFilter(), recorder("b", log))
    layer.unroute("a")
    layer.route("c", MessageFilter(), recorder("c", log))
    layer.handle(request("urn:x"))
    assert [name for name, _ in log] == ["b"]
    layer.unroute("b")
    layer.handle(request("urn:x"))
    assert [name for name, _ in log] == ["b", "c"]


def test_duplicate_route_name_refused(layer):
    layer.route("x", MessageFilter(), recorder("x", []))
    with pytest.raises(ValueError):
        layer.route("x", MessageFilter(action="urn:a"), recorder("x", []))


@pytest.mark.parametrize("wsa", [WsaVersion.WSA10, WsaVersion.WSA2004])
def test_unknown_action_is_action_not_supported_in_the_request_version(layer, wsa):
    layer.route("only", MessageFilter(action="urn:known"), recorder("only", []))
    outcome = layer.handle(request("urn:unknown", wsa=wsa))
    assert outcome.status == 400
    fault = fault_of(outcome)
    assert fault.code == SENDER
    assert fault.subcodes == (wsa.q("ActionNotSupported"),)
    assert fault.detail[0].tag == wsa.q("ProblemAction")
    assert fault.detail[0].find(wsa.q("Action")).text == "urn:unknown"
    reply = AddressingHeaders.parse(parse_envelope(outcome.body).headers)
    assert reply.version is wsa
    assert reply.action == wsa.fault_action
    assert reply.relates_to == REQUEST_ID


def test_unknown_action_without_addressing_uses_wsa10(layer):
    outcome = layer.handle(request(soap=SoapVersion.SOAP11), soap_action="urn:nothing",
                           content_type="text/xml")
    assert outcome.status == 500  # SOAP 1.1
    assert fault_of(outcome).subcodes == (ns.qname(ns.WSA10, "ActionNotSupported"),)


def test_soap_action_header_fallback_for_soap11(layer):
    log = []
    layer.route("a", MessageFilter(action="urn:from-header"), recorder("a", log))
    outcome = layer.handle(request(soap=SoapVersion.SOAP11), content_type="text/xml; charset=utf-8",
                           soap_action='"urn:from-header"')
    assert outcome.status == 200 and outcome.content_type == "text/xml; charset=utf-8"
    assert log[0][1].action == "urn:from-header"
    assert log[0][1].addressing is None


def test_content_type_action_parameter_for_soap12(layer):
    log = []
    layer.route("a", MessageFilter(action="urn:from-ct"), recorder("a", log))
    outcome = layer.handle(request(), content_type='application/soap+xml; charset=utf-8; action="urn:from-ct"')
    assert outcome.status == 200
    assert outcome.content_type == "application/soap+xml; charset=utf-8"
    assert log[0][1].action == "urn:from-ct"


def test_wsa_action_beats_transport_action(layer):
    log = []
    layer.route("a", MessageFilter(action="urn:wsa"), recorder("a", log))
    layer.handle(request("urn:wsa"), soap_action="urn:header",
                 content_type='application/soap+xml; action="urn:ct"')
    assert log[0][1].action == "urn:wsa"


@pytest.mark.parametrize("to, expected", [
    (BASE + "/topics/a", "/topics/a"),
    (BASE, "/"),
    ("http://other.example/admin", "/admin"),
    ("https://svc.example/base/admin?x=1", "/admin"),
    ("http://svc.example/basement/admin", "/basement/admin"),
    ("urn:not-http", "/given"),
    ("http://svc.example", "/given"),
])
def test_path_taken_from_wsa_to_when_http(layer, to, expected):
    log = []
    layer.route("any", MessageFilter(), recorder("any", log))
    layer.handle(request("urn:a", to=to), path="/given", base_url=BASE)
    message = log[0][1]
    assert message.path == expected
    assert message.address == BASE + expected


def test_incoming_message_facts(layer):
    log = []
    layer.route("any", MessageFilter(), recorder("any", log))
    key = etree.Element("{urn:app}Key")
    key.text = " k1 "
    layer.handle(request("urn:a", body=quote(), extra=[key]), path="/p", base_url=BASE,
                 remote_addr="10.0.0.1")
    message = log[0][1]
    assert message.body.tag == "{%s}quote" % Q
    assert message.soap_version is SoapVersion.SOAP12
    assert message.wsa_version is WsaVersion.WSA10
    assert message.remote_addr == "10.0.0.1"
    assert message.reference_parameter("{urn:app}Key") == "k1"
    assert message.header("{urn:app}Key") is not None


def test_reference_parameter_without_addressing(layer):
    log = []
    layer.route("any", MessageFilter(), recorder("any", log))
    key = etree.Element("{urn:app}Key")
    key.text = "k2"
    layer.handle(build_envelope(SoapVersion.SOAP12, None, [key]))
    assert log[0][1].addressing is None
    assert log[0][1].reference_parameter("{urn:app}Key") == "k2"
    assert log[0][1].reference_parameter("{urn:app}Other") is None


# --- replies on the back channel ----------------------------------------------------

@pytest.mark.parametrize("soap", [SoapVersion.SOAP11, SoapVersion.SOAP12])
def test_reply_on_the_back_channel(layer, soap):
    extra = etree.Element("{urn:app}Extra")
    layer.route("r", MessageFilter(action="urn:req"),
                lambda m: Reply("urn:resp", quote("7"), [extra]))
    outcome = layer.handle(request("urn:req", soap=soap), content_type=soap.content_type)
    assert outcome.status == 200
    assert outcome.content_type == soap.content_type + "; charset=utf-8"
    reply = parse_envelope(outcome.body)
    assert reply.version is soap
    addressing = AddressingHeaders.parse(reply.headers)
    assert (addressing.action, addressing.relates_to, addressing.message_id) == \
        ("urn:resp", REQUEST_ID, PINNED_ID)
    assert reply.header("{urn:app}Extra") is not None
    assert reply.body.find("{%s}price" % Q).text == "7"


def test_one_way_handler_gives_202_and_no_body(layer):
    layer.route("one-way", MessageFilter(), lambda m: None)
    assert layer.handle(request("urn:notify")) == Outcome(202, None, b"")


@pytest.mark.parametrize("soap, status", [(SoapVersion.SOAP11, 500), (SoapVersion.SOAP12, 400)])
def test_handler_soap_fault_is_sent(layer, soap, status):
    detail = etree.Element("{urn:app}Why")
    detail.text = "because"

    def refuse(message):
        raise sender_fault("not today", "{urn:app}NotToday", [detail], action="urn:app/fault")
    layer.route("r", MessageFilter(), refuse)
    outcome = layer.handle(request("urn:a", soap=soap), content_type=soap.content_type)
    assert outcome.status == status
    assert outcome.content_type == soap.content_type + "; charset=utf-8"
    reply = parse_envelope(outcome.body)
    fault = reply.fault()
    assert fault.code == SENDER and fault.reason == "not today"
    assert fault.subcode == "{urn:app}NotToday"
    assert fault.detail[0].text == "because"
    assert AddressingHeaders.parse(reply.headers).action == "urn:app/fault"


@pytest.mark.parametrize("soap, status", [(SoapVersion.SOAP11, 500), (SoapVersion.SOAP12, 500)])
def test_handler_crash_is_a_receiver_fault_without_internals(layer, soap, status, caplog):
    def crash(message):
        raise RuntimeError("secret-internal-detail")
    layer.route("r", MessageFilter(), crash)
    outcome = layer.handle(request("urn:a", soap=soap), content_type=soap.content_type)
    assert outcome.status == status
    assert fault_of(outcome).code == RECEIVER
    for leak in (b"Traceback", b"RuntimeError", b"secret-internal-detail", b".py"):
        assert leak not in outcome.body
    assert "secret-internal-detail" in caplog.text  # logged for the operator, not sent


def test_version_mismatch_is_answered_in_soap12(layer):
    layer.route("r", MessageFilter(), recorder("r", []))
    outcome = layer.handle(request("urn:a", soap=SoapVersion.SOAP11), content_type="application/soap+xml")
    assert outcome.status == 500
    assert outcome.content_type.startswith("application/soap+xml")
    assert fault_of(outcome).code == VERSION_MISMATCH


def test_addressing_fault_is_answered_before_dispatch(layer):
    log = []
    layer.route("r", MessageFilter(), recorder("r", log))
    headers = request_headers(WsaVersion.WSA10, "http://x", "urn:a")
    headers.append(etree.fromstring(etree.tostring(headers[1])))  # a second wsa:Action
    outcome = layer.handle(build_envelope(SoapVersion.SOAP12, None, headers))
    assert log == []
    assert fault_of(outcome).subcodes[-1] == ns.qname(ns.WSA10, "InvalidCardinality")


# --- replies through the transport ----------------------------------------------------

class RecordingEndpoint:
    """A callable in-process endpoint that records posts and signals each one."""

    def __init__(self):
        self.posts = []
        self.arrived = threading.Event()

    def __call__(self, url, payload, content_type, soap_action):
        self.posts.append((url, payload, content_type, soap_action))
        self.arrived.set()
        return TransportResponse(202, None, b"")


def public_names(**kwargs) -> UrlPolicy:
    """A reply policy whose resolver answers a public address for every name (no DNS)."""
    def resolve(host, port, *args):
        return [(2, 1, 6, "", ("93.184.216.34", port))]
    return UrlPolicy(resolver=resolve, **kwargs)


@pytest.fixture
def client_side():
    transport = InProcessTransport()
    endpoint = RecordingEndpoint()
    transport.mount("http://client.example", endpoint)
    layer = MessagingLayer(transport=transport, reply_policy=public_names())
    yield layer, endpoint, transport
    layer.close()


@pytest.mark.parametrize("wsa", [WsaVersion.WSA10, WsaVersion.WSA2004])
def test_reply_posted_to_non_anonymous_reply_to(client_side, wsa):
    layer, endpoint, _ = client_side
    layer.route("r", MessageFilter(action="urn:req"), lambda m: Reply("urn:resp", quote()))
    ctx = etree.Element("{urn:app}Ctx")
    ctx.text = "c-1"
    reply_to = EndpointReference("http://client.example/replies", (ctx,))
    outcome = layer.handle(request("urn:req", wsa=wsa, reply_to=reply_to))
    assert outcome == Outcome(202, None, b"")
    assert endpoint.arrived.wait(5)
    url, payload, content_type, soap_action = endpoint.posts[0]
    assert url == "http://client.example/replies"
    assert content_type == "application/soap+xml" and soap_action == "urn:resp"
    reply = parse_envelope(payload)
    addressing = AddressingHeaders.parse(reply.headers)
    assert addressing.version is wsa
    assert (addressing.to, addressing.action, addressing.relates_to) == \
        ("http://client.example/replies", "urn:resp", REQUEST_ID)
    assert addressing.reference_parameter("{urn:app}Ctx") == "c-1"
    assert reply.body.tag == "{%s}quote" % Q


def test_fault_posted_to_fault_to(client_side):
    layer, endpoint, _ = client_side

    def refuse(message):
        raise sender_fault("no", "{urn:app}No")
    layer.route("r", MessageFilter(), refuse)
    outcome = layer.handle(request(
        "urn:req", soap=SoapVersion.SOAP11,
        reply_to=EndpointReference("http://client.example/replies"),
        fault_to=EndpointReference("http://client.example/faults")), content_type="text/xml")
    assert outcome.status == 202 and outcome.body == b""
    assert endpoint.arrived.wait(5)
    url, payload, content_type, _ = endpoint.posts[0]
    assert url == "http://client.example/faults"
    assert content_type == "text/xml"
    assert parse_envelope(payload).fault().subcode == "{urn:app}No"
    layer.close()
    assert len(endpoint.posts) == 1  # nothing went to ReplyTo


def test_none_reply_to_discards_the_reply(client_side):
    layer, endpoint, transport = client_side
    handled = []
    layer.route("r", MessageFilter(), lambda m: handled.append(m) or Reply("urn:resp", quote()))
    outcome = layer.handle(request("urn:req", reply_to=EndpointReference(ns.WSA10_NONE)))
    assert outcome == Outcome(202, None, b"")
    assert handled
    layer.close()  # waits for anything queued
    assert transport.sent == [] and endpoint.posts == []


def test_reply_without_transport_is_dropped_not_raised():
    layer = MessagingLayer(transport=None, reply_policy=public_names())
    layer.route("r", MessageFilter(), lambda m: Reply("urn:resp", None))
    outcome = layer.handle(request("urn:req", reply_to=EndpointReference("http://gone.example/r")))
    assert outcome.status == 202
    layer.close()


def test_failing_reply_transport_is_contained(client_side):
    layer, endpoint, transport = client_side
    layer.route("r", MessageFilter(), lambda m: Reply("urn:resp", None))
    outcome = layer.handle(request("urn:req", reply_to=EndpointReference("http://unmounted.example/r")))
    assert outcome.status == 202
    layer.close()
    assert [url for url, _ in transport.sent] == ["http://unmounted.example/r"]


@pytest.mark.parametrize("address", ["http://127.0.0.1:9/faults", "http://[::1]/f",
                                     "http://169.254.169.254\\@127.0.0.1/",
                                     "http://user:pw@client.example/faults",
                                     "http://client.example/" + "x" * 3000])
def test_refused_fault_to_gets_the_fault_on_the_http_response(address):
    transport = InProcessTransport()
    layer = MessagingLayer(transport=transport, reply_policy=public_names(allow_loopback=False))
    outcome = layer.handle(request("urn:unknown", fault_to=EndpointReference(address)))
    layer.close()
    assert transport.sent == []
    assert outcome.status == 400 and b"ActionNotSupported" in outcome.body
    envelope = parse_envelope(outcome.body)
    to = envelope.header(ns.qname(ns.WSA10, "To"))
    assert to is None or to.text == ns.WSA10_ANONYMOUS


def test_refused_reply_to_gets_the_reply_on_the_http_response():
    transport = InProcessTransport()
    layer = MessagingLayer(transport=transport, reply_policy=public_names(allow_loopback=False))
    layer.route("r", MessageFilter(action="urn:req"), lambda m: Reply("urn:resp", quote()))
    outcome = layer.handle(request("urn:req", reply_to=EndpointReference("http://127.0.0.1:9/r")))
    layer.close()
    assert transport.sent == [] and outcome.status == 200
    assert parse_envelope(outcome.body).header(ns.qname(ns.WSA10, "Action")).text == "urn:resp"


def test_access_denied_faults_only_on_the_http_response(client_side):
    """An unauthenticated message never makes the service send to its ReplyTo/FaultTo, even
    where the policy would allow it."""
    import wsframework.admin  # noqa: F401  (registers the adm:AccessDenied translation)
    from wsframework.exceptions import AccessDenied
    layer, endpoint, transport = client_side

    def refuse(message):
        raise AccessDenied("a valid admin credential is required")
    layer.route("r", MessageFilter(action="urn:req"), refuse)
    outcome = layer.handle(request(
        "urn:req", reply_to=EndpointReference("http://client.example/replies"),
        fault_to=EndpointReference("http://client.example/faults")))
    layer.close()
    assert transport.sent == [] and endpoint.posts == []
    assert outcome.status in (400, 500) and b"AccessDenied" in outcome.body
