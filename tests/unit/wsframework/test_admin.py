"""Admin messages end to end in-process: Service + InProcessTransport + AdminClient, and raw
envelopes for what a well-behaved client would never send."""

import pytest
from lxml import etree

from wsframework.matching.registry import DEFAULT_MATCHER_URI
from wsframework import admin as contracts
from wsframework import ns
from wsframework.addressing import WsaVersion, request_headers
from wsframework.admin import AdminClient
from wsframework.client import SoapClient
from wsframework.exceptions import SENDER, SoapFault
from wsframework.service import Service, ServiceConfig
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from wsframework.transport import InProcessTransport

BASE = "http://edn.example"
TOKEN = "s3cret-token"
KEYWORDS_URI = "urn:edn-example:matchers:keywords"
ADM = ns.ADMIN


@pytest.fixture
def transport():
    return InProcessTransport()


@pytest.fixture
def service(tmp_path, transport):
    service = Service(ServiceConfig(base_url=BASE, data_dir=tmp_path, admin_token=TOKEN),
                      transport=transport)
    transport.mount(BASE, service)
    yield service
    service.close()


@pytest.fixture
def admin(service, transport):
    return AdminClient(BASE, TOKEN, transport=transport)


def client_with(token, transport, soap_version=SoapVersion.SOAP12, wsa_version=WsaVersion.WSA10):
    return AdminClient(BASE, token, soap_client=SoapClient(
        transport, soap_version=soap_version, wsa_version=wsa_version))


def listed(admin):
    return [topic["name"] for topic in admin.list_topics()]


def raw_admin(service, body, *, token=TOKEN, soap=SoapVersion.SOAP12, action="urn:wsframework:admin/X"):
    """Post a hand-made admin envelope; returns (outcome, parsed reply)."""
    headers = request_headers(WsaVersion.WSA10, BASE + "/admin", action)
    if token is not None:
        block = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ADM})
        block.text = token
        headers.append(block)
    if isinstance(body, str):
        body = etree.fromstring(body)
    outcome = service.handle_request(build_envelope(soap, body, headers), path="/admin",
                                     content_type=soap.content_type)
    return outcome, parse_envelope(outcome.body)


def admin_fault(call) -> SoapFault:
    with pytest.raises(SoapFault) as info:
        call()
    return info.value


# --- the happy path -------------------------------------------------------------------

def test_create_list_delete(admin, service):
    created = admin.create_topic("stocks/nyse")
    assert created == {"name": "stocks/nyse", "matcher": DEFAULT_MATCHER_URI,
                       "address": BASE + "/topics/stocks/nyse"}
    admin.create_topic("stocks/lse")
    admin.create_topic("news")
    assert listed(admin) == ["news", "stocks/lse", "stocks/nyse"]
    assert [t["name"] for t in admin.list_topics("stocks")] == ["stocks/lse", "stocks/nyse"]
    topic = admin.list_topics("news")[0]
    assert topic == {"name": "news", "matcher": DEFAULT_MATCHER_URI,
                     "address": BASE + "/topics/news", "filters": 0}
    assert admin.delete_topic("stocks/lse") == "stocks/lse"
    assert listed(admin) == ["news", "stocks/nyse"]
    assert sorted(e.name for e in service.topics.entries()) == ["news", "stocks/nyse"]


@pytest.mark.parametrize("soap, wsa", [(SoapVersion.SOAP11, WsaVersion.WSA10),
                                       (SoapVersion.SOAP11, WsaVersion.WSA2004),
                                       (SoapVersion.SOAP12, WsaVersion.WSA2004)])
def test_admin_in_every_version_pairing(service, transport, soap, wsa):
    admin = client_with(TOKEN, transport, soap, wsa)
    admin.create_topic("t")
    assert listed(admin) == ["t"]
    fault = admin_fault(lambda: admin.create_topic("t"))
    assert fault.subcode == contracts.FAULT_TOPIC_EXISTS


def test_plugin_matcher_binding(admin, service):
    from edn_example_matcher import KeywordMatcher
    created = admin.create_topic("news", KEYWORDS_URI)
    assert created["matcher"] == KEYWORDS_URI
    assert isinstance(service.topics.get("news").matcher, KeywordMatcher)
    assert admin.list_topics()[0]["matcher"] == KEYWORDS_URI


def test_options_reach_the_namespace(admin, service):
    options = etree.fromstring('<o:Engine xmlns:o="urn:opts"><o:Mode>fast</o:Mode></o:Engine>')
    admin.create_topic("with-options", options=options)
    config = service.topics.get("with-options").config_element()
    assert config.tag == "{urn:opts}Engine" and config.find("{urn:opts}Mode").text == "fast"


def test_change_by_another_worker_is_visible(admin, service, tmp_path):
    other = Service(ServiceConfig(base_url=BASE, data_dir=tmp_path, admin_token=TOKEN),
                    transport=InProcessTransport())
    try:
        other.topics.create("made-elsewhere")
        assert listed(admin) == ["made-elsewhere"]
    finally:
        other.close()


# --- credentials ----------------------------------------------------------------------

@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN + "x", TOKEN[:-1], " " + TOKEN.upper()])
def test_bad_credentials_change_nothing(admin, service, transport, token):
    admin.create_topic("keep")
    before = listed(admin)
    if token is None:
        outcome, reply = raw_admin(service, contracts.render(contracts.CreateTopic(Name="evil")),
                                   token=None)
        fault = reply.fault()
        assert outcome.status == 400
    else:
        intruder = client_with(token, transport)
        fault = admin_fault(lambda: intruder.create_topic("evil"))
        assert admin_fault(lambda: intruder.delete_topic("keep")).subcode == \
            contracts.FAULT_ACCESS_DENIED
        assert admin_fault(lambda: intruder.list_topics()).subcode == contracts.FAULT_ACCESS_DENIED
    assert fault.code == SENDER
    assert fault.subcode == contracts.FAULT_ACCESS_DENIED
    assert listed(admin) == before == ["keep"]
    assert [e.name for e in service.topics.entries()] == ["keep"]


PADDINGS = [" ", "\t", "\n", "\r", "\u00a0", "\u2003"]


@pytest.mark.parametrize("padding", PADDINGS, ids=repr)
@pytest.mark.parametrize("where", ["leading", "trailing", "both"])
def test_a_padded_token_is_refused_for_reads_and_writes(admin, service, transport, padding, where):
    """The credential is compared exactly: whitespace or Unicode spaces around it make a
    different token (no stripping, no normalisation), for every message."""
    padded = {"leading": padding + TOKEN, "trailing": TOKEN + padding,
              "both": padding + TOKEN + padding}[where]
    admin.create_topic("keep")
    intruder = client_with(padded, transport)
    for call in (lambda: intruder.create_topic("evil"), lambda: intruder.delete_topic("keep"),
                 lambda: intruder.list_topics()):
        fault = admin_fault(call)
        assert (fault.code, fault.subcode) == (SENDER, contracts.FAULT_ACCESS_DENIED)
    assert [e.name for e in service.topics.entries()] == ["keep"]


@pytest.mark.parametrize("padding", PADDINGS, ids=repr)
def test_carries_credential_compares_exactly(padding):
    from wsframework.admin import carries_credential
    from wsframework.messaging import IncomingMessage

    def message_with(text, child=False):
        block = etree.Element(contracts.ADMIN_TOKEN_QNAME, nsmap={"adm": ADM})
        block.text = text
        if child:
            etree.SubElement(block, "x")
        data = build_envelope(SoapVersion.SOAP12, etree.Element("b"), [block])
        return IncomingMessage(envelope=parse_envelope(data), addressing=None, action=None,
                               path="/admin", base_url=BASE)

    assert carries_credential(message_with(TOKEN), TOKEN)
    assert carries_credential(message_with(TOKEN), TOKEN.encode())
    for text in (padding + TOKEN, TOKEN + padding, padding + TOKEN + padding):
        assert not carries_credential(message_with(text), TOKEN)
    assert not carries_credential(message_with(TOKEN, child=True), TOKEN)
    assert not carries_credential(message_with(""), "")


def test_token_is_checked_before_the_body(service):
    outcome, reply = raw_admin(service, "<garbage/>", token="wrong")
    assert reply.fault().subcode == contracts.FAULT_ACCESS_DENIED
    outcome, reply = raw_admin(service, None, token=None)
    assert reply.fault().subcode == contracts.FAULT_ACCESS_DENIED


def test_token_is_never_echoed(service):
    outcome, _ = raw_admin(service, "<garbage/>", token="wrong-guess-123")
    assert b"wrong-guess-123" not in outcome.body
    outcome, _ = raw_admin(service, "<garbage/>")
    assert TOKEN.encode() not in outcome.body


def test_service_requires_a_token(tmp_path, transport):
    with pytest.raises(ValueError):
        Service(ServiceConfig(base_url=BASE, data_dir=tmp_path, admin_token=""), transport=transport)


# --- faults ---------------------------------------------------------------------------

def test_unknown_matcher_fault_lists_known_matchers(admin, service):
    fault = admin_fault(lambda: admin.create_topic("t", "urn:no-such-engine"))
    assert fault.code == SENDER
    assert fault.subcode == contracts.FAULT_UNKNOWN_MATCHER
    known = [d.text for d in fault.detail if d.tag == contracts.KNOWN_MATCHER_QNAME]
    assert DEFAULT_MATCHER_URI in known and KEYWORDS_URI in known
    assert len(known) == len(fault.detail)
    assert listed(admin) == []


def test_topic_exists(admin):
    admin.create_topic("dup")
    fault = admin_fault(lambda: admin.create_topic("/dup/"))
    assert (fault.code, fault.subcode) == (SENDER, contracts.FAULT_TOPIC_EXISTS)
    assert listed(admin) == ["dup"]


def test_unknown_topic(admin):
    fault = admin_fault(lambda: admin.delete_topic("missing"))
    assert (fault.code, fault.subcode) == (SENDER, contracts.FAULT_UNKNOWN_TOPIC)
    assert fault.reason == "no topic named 'missing'"


@pytest.mark.parametrize("name", ["..", "a//b", "bad name", "/".join("x" * 17), "-x"])
def test_invalid_name(admin, name):
    fault = admin_fault(lambda: admin.create_topic(name))
    assert (fault.code, fault.subcode) == (SENDER, contracts.FAULT_INVALID_NAME)
    fault = admin_fault(lambda: admin.delete_topic(name))
    assert fault.subcode == contracts.FAULT_INVALID_NAME
    assert listed(admin) == []


@pytest.mark.parametrize("body", [
    None,
    '<adm:CreateTopic xmlns:adm="%s"/>' % ADM,
    '<adm:CreateTopic xmlns:adm="%s"><adm:Name>a</adm:Name><adm:Name>b</adm:Name></adm:CreateTopic>' % ADM,
    '<adm:Frobnicate xmlns:adm="%s"/>' % ADM,
    '<CreateTopic><Name>a</Name></CreateTopic>',
    '<adm:DeleteTopic xmlns:adm="%s"/>' % ADM,
    '<adm:CreateTopic xmlns:adm="%s"><adm:Name>a</adm:Name><adm:Options>text</adm:Options>'
    '</adm:CreateTopic>' % ADM,
], ids=["empty", "no-name", "two-names", "unknown-op", "no-namespace", "delete-no-name", "bad-options"])
def test_malformed_admin_body_is_invalid_request(service, admin, body):
    outcome, reply = raw_admin(service, body)
    assert outcome.status == 400
    fault = reply.fault()
    assert (fault.code, fault.subcode) == (SENDER, contracts.FAULT_INVALID_REQUEST)
    assert listed(admin) == []


@pytest.mark.parametrize("soap, status", [(SoapVersion.SOAP11, 500), (SoapVersion.SOAP12, 400)])
def test_admin_fault_status_per_soap_version(service, soap, status):
    outcome, reply = raw_admin(service, "<x/>", token="wrong", soap=soap)
    assert outcome.status == status
    assert outcome.content_type.startswith(soap.content_type)
    assert reply.version is soap


def test_admin_reply_is_correlated(service):
    outcome, reply = raw_admin(service, contracts.render(contracts.ListTopics()),
                               action=contracts.action_for("ListTopics"))
    assert outcome.status == 200
    from wsframework.addressing import AddressingHeaders
    addressing = AddressingHeaders.parse(reply.headers)
    assert addressing.action == contracts.action_for("ListTopicsResponse")
    assert addressing.relates_to and addressing.relates_to.startswith("urn:uuid:")
    assert reply.body.tag == "{%s}ListTopicsResponse" % ADM


def test_admin_only_at_the_admin_path(service):
    headers = request_headers(WsaVersion.WSA10, BASE + "/elsewhere", contracts.action_for("ListTopics"))
    token = etree.Element(contracts.ADMIN_TOKEN_QNAME)
    token.text = TOKEN
    data = build_envelope(SoapVersion.SOAP12, contracts.render(contracts.ListTopics()), headers + [token])
    outcome = service.handle_request(data, path="/elsewhere", content_type="application/soap+xml")
    fault = parse_envelope(outcome.body).fault()
    assert fault.subcode == ns.qname(ns.WSA10, "ActionNotSupported")


# --- a message of the application's own ----------------------------------------------------

ECHO_NS = "urn:example:echo"


class Echo(contracts.Contract):
    __namespace__ = ECHO_NS
    _type_info = [("Text", contracts.required(contracts.Unicode))]


class EchoResponse(contracts.Contract):
    __namespace__ = ECHO_NS
    _type_info = [("Text", contracts.required(contracts.Unicode))]


contracts.register_contract(Echo, element="{%s}Echo" % ECHO_NS)
contracts.register_contract(EchoResponse, request=False, element="{%s}EchoResponse" % ECHO_NS)


def test_an_application_declares_and_serves_its_own_message(service, admin, transport):
    service.admin.register(Echo, lambda request, message: EchoResponse(Text=request.Text.upper()))
    assert admin.call(Echo(Text="hi")) == EchoResponse(Text="HI")
    sent = etree.fromstring(transport.sent[-1][1])
    assert [a.text for a in sent.iter("{*}Action")] == [ECHO_NS + "/Echo"]
    outcome, reply = raw_admin(service, '<e:Echo xmlns:e="%s"><e:Text>a</e:Text></e:Echo>'
                               % ECHO_NS, action=ECHO_NS + "/Echo")
    assert [a.text for a in etree.fromstring(outcome.body).iter("{*}Action")] == \
        [ECHO_NS + "/EchoResponse"]
