"""Hostile and malformed XML: refused by the parser, and answered with a SOAP Sender fault (never
an exception) by the messaging layer."""

from pathlib import Path

import pytest
from lxml import etree

from wsframework import ns, xmlparse
from wsframework.exceptions import SENDER, SoapFault
from wsframework.messaging import MessageFilter, MessagingLayer, Reply
from wsframework.soap import SoapVersion, parse_envelope
from wsframework.xmlparse import ParserLimits, XmlRejected, parse_xml

PASSWD = Path("/etc/passwd")
# Something only the real file would contribute to a reply.
PASSWD_MARKERS = [line.encode() for line in
                  (PASSWD.read_text().splitlines()[:3] if PASSWD.exists() else ["root:x:0:0"])
                  if line.strip()]


def soap(body_xml, version=SoapVersion.SOAP12):
    return ('<e:Envelope xmlns:e="%s"><e:Body>%s</e:Body></e:Envelope>'
            % (version.namespace, body_xml)).encode()


XXE = (b'<?xml version="1.0"?>\n<!DOCTYPE e:Envelope [\n'
       b'  <!ENTITY xxe SYSTEM "file:///etc/passwd">\n]>\n'
       b'<e:Envelope xmlns:e="' + ns.SOAP12.encode() + b'"><e:Body><x>&xxe;</x></e:Body></e:Envelope>')
XXE_PARAMETER = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]>'
                 b'<r/>')


def billion_laughs(levels=10, fanout=10) -> bytes:
    entities = ['<!ENTITY lol0 "lol">']
    for level in range(1, levels):
        entities.append('<!ENTITY lol%d "%s">' % (level, ("&lol%d;" % (level - 1)) * fanout))
    return ('<?xml version="1.0"?><!DOCTYPE e:Envelope [%s]>'
            '<e:Envelope xmlns:e="%s"><e:Body><x a="&lol%d;">&lol%d;</x></e:Body></e:Envelope>'
            % ("".join(entities), ns.SOAP12, levels - 1, levels - 1)).encode()


def utf16(data: bytes) -> bytes:
    text = data.decode().replace('<?xml version="1.0"?>', "")
    return text.encode("utf-16")


def deep(levels):
    return soap("<d>" * levels + "</d>" * levels)


HOSTILE = {
    "xxe": XXE,
    "xxe-parameter-entity": XXE_PARAMETER,
    "xxe-utf16": utf16(XXE),
    "xxe-utf16le-no-bom": utf16(XXE)[2:],
    "xxe-utf32": XXE.decode().replace('<?xml version="1.0"?>', "").encode("utf-32"),
    "xxe-utf7": (b'<?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE r +AFs-+ADw-!ENTITY x '
                 b'SYSTEM +ACI-file:///etc/passwd+ACI-+AD4-+AF0-+AD4-<r>&x;</r>'),
    "billion-laughs": billion_laughs(),
    "billion-laughs-utf16": utf16(billion_laughs()),
    "lowercase-doctype": b'<!doctype r><r/>',
    "deep-10000": deep(10_000),
    "deep-over-limit": deep(120),
    "malformed": b"<e:Envelope xmlns:e='urn:x'><e:Body></e:Envelope>",
    "unbound-prefix": b"<e:Envelope><e:Body/></e:Envelope>",
    "undefined-entity": soap("<x>&nope;</x>"),
    "garbage": bytes(range(128, 256)) * 8,
    "bad-utf8": soap("<x>\xff</x>").replace(b"\xc3\xbf", b"\xff\xfe"),
    "nul-bytes": b"\x00" * 64,
    "empty": b"",
    "blank": b" \r\n\t ",
    "text-only": b"hello",
    "two-roots": soap("") + soap(""),
}


# --- the parser ---------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_is_refused(name):
    with pytest.raises(XmlRejected) as info:
        parse_xml(HOSTILE[name])
    assert info.value.reason


@pytest.mark.parametrize("name", ["xxe", "xxe-parameter-entity", "xxe-utf16", "xxe-utf16le-no-bom",
                                  "xxe-utf32", "billion-laughs", "billion-laughs-utf16",
                                  "lowercase-doctype"])
def test_dtds_never_reach_libxml2(name, monkeypatch):
    """Refused on the raw bytes: nothing is parsed, so nothing can be expanded or fetched."""
    calls = []
    real = xmlparse.etree.fromstring
    monkeypatch.setattr(xmlparse.etree, "fromstring", lambda *a, **k: calls.append(a) or real(*a, **k))
    with pytest.raises(XmlRejected) as info:
        parse_xml(HOSTILE[name])
    assert "document type declarations are not allowed" in info.value.reason
    assert calls == []


def test_doctype_in_an_encoding_the_byte_check_cannot_see_is_still_refused():
    with pytest.raises(XmlRejected) as info:
        parse_xml(HOSTILE["xxe-utf7"])
    assert "document type" in info.value.reason


def test_depth_limit_is_exact():
    limits = ParserLimits(max_depth=5)
    parse_xml(b"<a><b><c><d><e/></d></c></b></a>", limits)
    with pytest.raises(XmlRejected, match="deeper than 5"):
        parse_xml(b"<a><b><c><d><e><f/></e></d></c></b></a>", limits)


def test_element_count_limit_is_exact():
    limits = ParserLimits(max_elements=10)
    parse_xml(b"<r>" + b"<i/>" * 9 + b"</r>", limits)
    with pytest.raises(XmlRejected, match="more than 10 elements"):
        parse_xml(b"<r>" + b"<i/>" * 10 + b"</r>", limits)


def test_byte_limit_is_checked_before_parsing(monkeypatch):
    limits = ParserLimits(max_bytes=100)
    parse_xml(b"<r>" + b"x" * 90 + b"</r>", limits)  # 97 bytes
    monkeypatch.setattr(xmlparse.etree, "fromstring", lambda *a, **k: pytest.fail("parsed"))
    with pytest.raises(XmlRejected, match="exceeds the limit of 100"):
        parse_xml(b"<r>" + b"x" * 95 + b"</r>", limits)


def test_limits_must_be_positive():
    for kwargs in ({"max_bytes": 0}, {"max_depth": -1}, {"max_elements": 0}):
        with pytest.raises(ValueError):
            ParserLimits(**kwargs)


def test_parse_xml_takes_bytes_only():
    with pytest.raises(TypeError):
        parse_xml("<r/>")


def test_comments_and_processing_instructions_are_tolerated_and_dropped():
    root = parse_xml(b'<?xml version="1.0" encoding="utf-8"?>\n<?app hint?><!-- before -->'
                     b'<r><!-- inside --><?pi data?><c>t</c></r><!-- after -->')
    assert [child.tag for child in root] == ["c"]
    assert etree.tostring(root) == b"<r><c>t</c></r>"


def test_utf16_without_doctype_is_accepted():
    root = parse_xml('<r a="é">ü</r>'.encode("utf-16"))
    assert root.text == "ü" and root.get("a") == "é"


def test_no_network_or_xinclude_processing():
    root = parse_xml(b'<r xmlns:xi="http://www.w3.org/2001/XInclude">'
                     b'<xi:include href="file:///etc/passwd" parse="text"/></r>')
    assert etree.tostring(root).count(b"include") == 1
    assert not any(marker in etree.tostring(root) for marker in PASSWD_MARKERS)


# --- through the messaging layer ----------------------------------------------------

@pytest.fixture
def layer():
    layer = MessagingLayer(limits=ParserLimits(max_bytes=64 * 1024, max_depth=50, max_elements=500))
    echoed = []

    def echo(message):
        echoed.append(message)
        body = message.body
        return Reply("urn:echo/response",
                     None if body is None else etree.fromstring(etree.tostring(body)))
    layer.route("echo", MessageFilter(), echo)
    layer.echoed = echoed
    yield layer
    layer.close()


MESSAGING_CASES = dict(HOSTILE)
MESSAGING_CASES.update({
    "too-many-elements": soap("<r>" + "<i/>" * 600 + "</r>"),
    "too-many-bytes": soap("<r>%s</r>" % ("x" * 70_000)),
    "not-an-envelope": b"<r/>",
})


@pytest.mark.parametrize("version", [SoapVersion.SOAP11, SoapVersion.SOAP12])
@pytest.mark.parametrize("name", sorted(MESSAGING_CASES))
def test_messaging_answers_hostile_input_with_a_sender_fault(layer, name, version):
    outcome = layer.handle(MESSAGING_CASES[name], path="/x",
                           content_type=version.content_type + "; charset=utf-8")
    assert layer.echoed == []
    assert outcome.content_type == version.content_type + "; charset=utf-8"
    assert outcome.status == (400 if version is SoapVersion.SOAP12 else 500)
    reply = parse_envelope(outcome.body)
    assert reply.version is version
    fault = reply.fault()
    assert isinstance(fault, SoapFault) and fault.code == SENDER
    assert not any(marker in outcome.body for marker in PASSWD_MARKERS)
    assert b"lollol" not in outcome.body


def test_fault_reason_names_the_refusal(layer):
    outcome = layer.handle(HOSTILE["xxe"], content_type="application/soap+xml")
    assert "document type declarations" in parse_envelope(outcome.body).fault().reason
    outcome = layer.handle(MESSAGING_CASES["too-many-elements"], content_type="application/soap+xml")
    assert "more than 500 elements" in parse_envelope(outcome.body).fault().reason


def test_messaging_without_content_type_faults_in_soap11(layer):
    outcome = layer.handle(b"<<<", content_type=None)
    assert outcome.status == 500 and outcome.content_type.startswith("text/xml")
    assert parse_envelope(outcome.body).fault().code == SENDER


@pytest.mark.parametrize("version", [SoapVersion.SOAP11, SoapVersion.SOAP12])
def test_comments_and_pis_in_a_request_are_tolerated(layer, version):
    data = (b'<?xml version="1.0"?><?app x?><!-- c --><e:Envelope xmlns:e="%s"><!-- h -->'
            b'<e:Body><!-- b --><q xmlns="urn:q"><?pi?>ok</q></e:Body></e:Envelope>'
            % version.namespace.encode())
    outcome = layer.handle(data, content_type=version.content_type)
    assert outcome.status == 200
    reply = parse_envelope(outcome.body)
    assert reply.body.tag == "{urn:q}q" and reply.body.text == "ok"


def test_empty_soap_body_reaches_the_handler(layer):
    outcome = layer.handle(soap(""), content_type="application/soap+xml")
    assert outcome.status == 200
    assert layer.echoed[0].body is None
    assert parse_envelope(outcome.body).body is None


def test_element_count_is_exact_when_text_holds_more_angle_brackets_than_the_limit():
    # "<" in CDATA makes the byte count a loose bound: the elements are then counted.
    limits = ParserLimits(max_elements=3)
    assert parse_xml(b"<r><![CDATA[" + b"<" * 50 + b"]]><a/><b/></r>", limits).tag == "r"
    with pytest.raises(XmlRejected, match="more than 3 elements"):
        parse_xml(b"<r><![CDATA[" + b"<" * 50 + b"]]><a/><b/><c/></r>", limits)


def test_limits_hold_in_utf16_as_in_utf8():
    limits = ParserLimits(max_elements=5, max_depth=4)
    for codec in ("utf-8", "utf-16"):
        declared = f'<?xml version="1.0" encoding="{codec.upper()}"?>'
        with pytest.raises(XmlRejected, match="more than 5"):
            parse_xml((declared + "<r>" + "<a/>" * 5 + "</r>").encode(codec), limits)
        with pytest.raises(XmlRejected, match="deeper than 4"):
            parse_xml((declared + "<a>" * 5 + "</a>" * 5).encode(codec), limits)
        assert parse_xml((declared + "<a>" * 4 + "</a>" * 4).encode(codec), limits) is not None
