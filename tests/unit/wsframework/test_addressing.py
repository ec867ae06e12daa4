"""WS-Addressing 2004/08 and 1.0: headers, endpoint references, reply addressing, faults."""

import dataclasses

import pytest
from lxml import etree

from tests.support.xml import assert_xml_equal
from wsframework import addressing as wsa_module
from wsframework import ns
from wsframework.addressing import (AddressingHeaders, EndpointReference, WsaVersion,
                                    action_not_supported, destination_unreachable, header_required,
                                    is_none_address, reply_destination, reply_headers,
                                    request_headers)
from wsframework.exceptions import SENDER, SoapFault

V10, V2004 = WsaVersion.WSA10, WsaVersion.WSA2004
VERSIONS = [V10, V2004]
MSG_ID = "urn:uuid:00000000-0000-0000-0000-000000000001"
PINNED_ID = "urn:uuid:11111111-1111-1111-1111-111111111111"


@pytest.fixture(autouse=True)
def pinned_message_ids(monkeypatch):
    monkeypatch.setattr(wsa_module, "new_message_id", lambda: PINNED_ID)


def param(text="42", tag="{urn:app}SubscriptionId"):
    element = etree.Element(tag, nsmap={"app": "urn:app"})
    element.text = text
    return element


def headers_xml(version, inner):
    """Header blocks parsed from text with ``wsa`` bound to the version's namespace."""
    wrapper = etree.fromstring('<h xmlns:wsa="%s" xmlns:app="urn:app">%s</h>'
                               % (version.namespace, inner))
    return list(wrapper)


def full_headers(version):
    return headers_xml(version, f"""
        <wsa:To>http://svc/topics/a</wsa:To>
        <wsa:Action> urn:act </wsa:Action>
        <wsa:MessageID>{MSG_ID}</wsa:MessageID>
        <wsa:RelatesTo>urn:uuid:earlier</wsa:RelatesTo>
        <wsa:ReplyTo><wsa:Address>http://client/reply</wsa:Address>
          <wsa:ReferenceParameters><app:Ctx>r1</app:Ctx></wsa:ReferenceParameters></wsa:ReplyTo>
        <wsa:FaultTo><wsa:Address>http://client/faults</wsa:Address></wsa:FaultTo>
        <wsa:From><wsa:Address>http://client/me</wsa:Address></wsa:From>
        <app:SubscriptionId>s-9</app:SubscriptionId>""")


# --- versions -------------------------------------------------------------------------

def test_version_constants():
    assert V10.anonymous == "http://www.w3.org/2005/08/addressing/anonymous"
    assert V2004.anonymous == "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous"
    assert V10.fault_action == ns.WSA10_FAULT_ACTION
    assert V2004.fault_action == ns.WSA2004_FAULT_ACTION
    assert V10.invalid_header_fault == ns.qname(ns.WSA10, "InvalidAddressingHeader")
    assert V2004.invalid_header_fault == ns.qname(ns.WSA2004, "InvalidMessageInformationHeader")
    assert V10.header_required_fault == ns.qname(ns.WSA10, "MessageAddressingHeaderRequired")
    assert V2004.header_required_fault == ns.qname(ns.WSA2004, "MessageInformationHeaderRequired")


@pytest.mark.parametrize("version", VERSIONS)
def test_both_anonymous_uris_are_anonymous(version):
    assert version.is_anonymous(None)
    assert version.is_anonymous(ns.WSA10_ANONYMOUS)
    assert version.is_anonymous(ns.WSA2004_ANONYMOUS)
    assert not version.is_anonymous("http://client/reply")
    assert not version.is_anonymous(ns.WSA10_NONE)


# --- parsing headers ------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_parse_all_headers(version):
    parsed = AddressingHeaders.parse(full_headers(version))
    assert parsed.version is version
    assert parsed.to == "http://svc/topics/a"
    assert parsed.action == "urn:act"
    assert parsed.message_id == MSG_ID
    assert parsed.relates_to == "urn:uuid:earlier"
    assert parsed.reply_to == EndpointReference("http://client/reply", (param("r1", "{urn:app}Ctx"),))
    assert parsed.fault_to == EndpointReference("http://client/faults")
    assert parsed.from_ == EndpointReference("http://client/me")
    assert [h.tag for h in parsed.other_headers] == ["{urn:app}SubscriptionId"]


def test_no_addressing_headers_is_none():
    assert AddressingHeaders.parse([]) is None
    assert AddressingHeaders.parse([param()]) is None


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_optional_headers_are_none(version):
    parsed = AddressingHeaders.parse(headers_xml(version, "<wsa:Action>urn:a</wsa:Action>"))
    assert (parsed.to, parsed.message_id, parsed.relates_to, parsed.reply_to, parsed.fault_to,
            parsed.from_) == (None,) * 6


def test_duplicate_action_wsa10_is_invalid_cardinality():
    with pytest.raises(SoapFault) as info:
        AddressingHeaders.parse(headers_xml(V10, "<wsa:Action>a</wsa:Action><wsa:Action>b</wsa:Action>"))
    fault = info.value
    assert fault.code == SENDER
    assert fault.subcodes == (ns.qname(ns.WSA10, "InvalidAddressingHeader"),
                              ns.qname(ns.WSA10, "InvalidCardinality"))
    assert fault.action == ns.WSA10_FAULT_ACTION
    problem = fault.detail[0]
    assert problem.tag == ns.qname(ns.WSA10, "ProblemHeaderQName")
    assert problem.text == "wsa:Action" and problem.nsmap["wsa"] == ns.WSA10


def test_duplicate_action_wsa2004_is_invalid_message_information_header():
    with pytest.raises(SoapFault) as info:
        AddressingHeaders.parse(headers_xml(V2004, "<wsa:Action>a</wsa:Action><wsa:Action>a</wsa:Action>"))
    assert info.value.subcodes == (ns.qname(ns.WSA2004, "InvalidMessageInformationHeader"),)
    assert info.value.action == ns.WSA2004_FAULT_ACTION


@pytest.mark.parametrize("name", ["To", "MessageID", "RelatesTo", "ReplyTo", "FaultTo", "From"])
def test_every_single_valued_header_is_checked(name):
    inner = "<wsa:%s><wsa:Address>http://x</wsa:Address></wsa:%s>" % (name, name)
    with pytest.raises(SoapFault) as info:
        AddressingHeaders.parse(headers_xml(V10, inner * 2))
    assert info.value.detail[0].text == "wsa:" + name


def test_mixed_versions_fault():
    mixed = headers_xml(V10, "<wsa:Action>a</wsa:Action>") + \
        headers_xml(V2004, "<wsa:To>http://x</wsa:To>")
    with pytest.raises(SoapFault) as info:
        AddressingHeaders.parse(mixed)
    assert info.value.code == SENDER
    assert "mixes" in info.value.reason


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("address", ["", "<wsa:Address/>", "<wsa:Address>  </wsa:Address>"])
def test_epr_without_address_faults(version, address):
    with pytest.raises(SoapFault) as info:
        AddressingHeaders.parse(headers_xml(version, "<wsa:ReplyTo>%s</wsa:ReplyTo>" % address))
    fault = info.value
    assert fault.code == SENDER
    assert fault.subcodes[0] == version.invalid_header_fault
    if version is V10:
        assert fault.subcodes[1:] == (ns.qname(ns.WSA10, "MissingAddressInEPR"),)
    else:
        assert fault.subcodes[1:] == ()


def test_epr_address_in_the_wrong_version_is_missing():
    wrapper = etree.fromstring('<ReplyTo xmlns:w="%s"><w:Address>http://x</w:Address></ReplyTo>'
                               % ns.WSA2004)
    with pytest.raises(SoapFault):
        EndpointReference.from_element(wrapper, V10)


# --- endpoint references ----------------------------------------------------------------

def test_epr_needs_an_address():
    for bad in ("", "   ", None):
        with pytest.raises(ValueError):
            EndpointReference(bad)


def test_epr_equality_and_hash_compare_parameters_by_content():
    a = EndpointReference("http://x", (param("1"),))
    b = EndpointReference("http://x", (param("1"),))
    assert a == b and hash(a) == hash(b)
    assert a != EndpointReference("http://x", (param("2"),))
    assert a != EndpointReference("http://y", (param("1"),))
    assert a != EndpointReference("http://x")
    assert a != EndpointReference("http://x", (), (param("1"),))


@pytest.mark.parametrize("version", VERSIONS)
def test_epr_round_trip_with_reference_parameters(version):
    epr = EndpointReference("http://sink/n", (param("42"), param("x", "{urn:app}Other")))
    element = epr.to_element(version.q("NotifyTo"), version)
    assert_xml_equal(element, f"""
        <wsa:NotifyTo xmlns:wsa="{version.namespace}">
          <wsa:Address>http://sink/n</wsa:Address>
          <wsa:ReferenceParameters>
            <app:SubscriptionId xmlns:app="urn:app">42</app:SubscriptionId>
            <app:Other xmlns:app="urn:app">x</app:Other>
          </wsa:ReferenceParameters>
        </wsa:NotifyTo>""")
    back = EndpointReference.from_element(etree.fromstring(etree.tostring(element)), version)
    assert back == epr


def test_epr_2004_reference_properties_round_trip():
    epr = EndpointReference("http://sink", (param("p"),), (param("prop", "{urn:app}Prop"),))
    element = epr.to_element(V2004.q("EndTo"), V2004)
    assert [etree.QName(c).localname for c in element] == \
        ["Address", "ReferenceProperties", "ReferenceParameters"]
    back = EndpointReference.from_element(element, V2004)
    assert back == epr
    assert back.reference_properties[0].text == "prop"


def test_reference_properties_are_not_written_for_wsa10():
    epr = EndpointReference("http://sink", (), (param("prop", "{urn:app}Prop"),))
    element = epr.to_element(V10.q("EndTo"), V10)
    assert element.find(V10.q("ReferenceProperties")) is None
    # and WSA 1.0 has no ReferenceProperties to read
    props = etree.SubElement(element, V10.q("ReferenceProperties"))
    props.append(param())
    assert EndpointReference.from_element(element, V10).reference_properties == ()


def test_header_blocks_mark_reference_parameters_only_for_wsa10():
    epr = EndpointReference("http://sink", (param("42"),), (param("p", "{urn:app}Prop"),))
    marker = ns.qname(ns.WSA10, "IsReferenceParameter")
    blocks10 = epr.header_blocks(V10)
    assert [b.get(marker) for b in blocks10] == ["true", "true"]
    blocks2004 = epr.header_blocks(V2004)
    assert [(b.tag, b.text) for b in blocks2004] == [("{urn:app}Prop", "p"),
                                                      ("{urn:app}SubscriptionId", "42")]
    assert all(not b.attrib for b in blocks2004)
    # copies: the EPR's own parameters are untouched
    assert not epr.reference_parameters[0].attrib


def test_epr_reference_parameter_lookup():
    epr = EndpointReference("http://x", (param(" 42 "),), (param("p", "{urn:app}Prop"),))
    assert epr.reference_parameter("{urn:app}SubscriptionId") == "42"
    assert epr.reference_parameter("{urn:app}Prop") == "p"
    assert epr.reference_parameter("{urn:app}Missing") is None


@pytest.mark.parametrize("marked", [True, False])
def test_reference_parameter_found_with_or_without_marker(marked):
    attr = ' wsa:IsReferenceParameter="true"' if marked else ""
    parsed = AddressingHeaders.parse(headers_xml(
        V10, "<wsa:Action>a</wsa:Action><app:SubscriptionId%s> s-1 </app:SubscriptionId>" % attr))
    assert parsed.reference_parameter("{urn:app}SubscriptionId") == "s-1"
    assert parsed.reference_parameter("{urn:app}Nope") is None


# --- building headers --------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_to_elements_round_trip(version):
    parsed = AddressingHeaders.parse(full_headers(version))
    again = AddressingHeaders.parse(
        etree.fromstring(etree.tostring(e)) for e in parsed.to_elements())
    fields = ("version", "action", "to", "message_id", "relates_to", "reply_to", "fault_to", "from_")
    assert [getattr(again, f) for f in fields] == [getattr(parsed, f) for f in fields]
    assert [h.tag for h in again.other_headers] == ["{urn:app}SubscriptionId"]


@pytest.mark.parametrize("version", VERSIONS)
def test_request_headers_target_an_epr(version):
    target = EndpointReference("http://svc/subs", (param("s-7"),))
    reply_to = EndpointReference("http://me/replies")
    blocks = request_headers(version, target, "urn:act", reply_to=reply_to)
    parsed = AddressingHeaders.parse(blocks)
    assert parsed.version is version
    assert (parsed.to, parsed.action, parsed.message_id) == ("http://svc/subs", "urn:act", PINNED_ID)
    assert parsed.reply_to == reply_to
    assert parsed.reference_parameter("{urn:app}SubscriptionId") == "s-7"
    marked = blocks[-1].get(ns.qname(ns.WSA10, "IsReferenceParameter"))
    assert marked == ("true" if version is V10 else None)


def test_request_headers_keep_an_explicit_message_id():
    parsed = AddressingHeaders.parse(request_headers(V10, "http://x", "urn:a", message_id="urn:m"))
    assert parsed.message_id == "urn:m"


def test_new_message_ids_are_unique_uuid_urns(monkeypatch):
    monkeypatch.undo()
    first, second = wsa_module.new_message_id(), wsa_module.new_message_id()
    assert first.startswith("urn:uuid:") and len(first) == len("urn:uuid:") + 36
    assert first != second


# --- reply addressing ----------------------------------------------------------------

def reply_parsed(request, action="urn:reply", fault=False):
    return AddressingHeaders.parse(reply_headers(request, action, fault=fault))


@pytest.mark.parametrize("version", VERSIONS)
def test_reply_to_a_reply_to_epr(version):
    request = AddressingHeaders.parse(full_headers(version))
    reply = reply_parsed(request)
    assert reply.version is version
    assert reply.to == "http://client/reply"
    assert reply.action == "urn:reply"
    assert reply.relates_to == MSG_ID
    assert reply.message_id == PINNED_ID
    assert reply.reference_parameter("{urn:app}Ctx") == "r1"
    blocks = reply_headers(request, "urn:reply")
    ctx = [b for b in blocks if b.tag == "{urn:app}Ctx"][0]
    assert ctx.get(ns.qname(ns.WSA10, "IsReferenceParameter")) == ("true" if version is V10 else None)


@pytest.mark.parametrize("version", VERSIONS)
def test_fault_goes_to_fault_to(version):
    request = AddressingHeaders.parse(full_headers(version))
    reply = reply_parsed(request, fault=True)
    assert reply.to == "http://client/faults"
    assert reply.reference_parameter("{urn:app}Ctx") is None
    assert reply_destination(request, fault=True).address == "http://client/faults"
    assert reply_destination(request, fault=False).address == "http://client/reply"


def test_fault_without_fault_to_goes_to_reply_to():
    request = AddressingHeaders.parse(headers_xml(
        V10, "<wsa:MessageID>m</wsa:MessageID><wsa:ReplyTo><wsa:Address>http://r</wsa:Address></wsa:ReplyTo>"))
    assert reply_destination(request, fault=True).address == "http://r"


@pytest.mark.parametrize("version", VERSIONS)
def test_anonymous_reply_goes_on_the_back_channel(version):
    request = AddressingHeaders.parse(headers_xml(version, f"""
        <wsa:MessageID>{MSG_ID}</wsa:MessageID>
        <wsa:ReplyTo><wsa:Address>{version.anonymous}</wsa:Address></wsa:ReplyTo>"""))
    assert reply_destination(request, fault=False) is None
    reply = reply_parsed(request)
    assert reply.relates_to == MSG_ID
    # WSA 1.0 omits To for anonymous; 2004/08 addresses the anonymous role explicitly
    assert reply.to == (None if version is V10 else ns.WSA2004_ANONYMOUS)


def test_none_address_is_recognised():
    request = AddressingHeaders.parse(headers_xml(
        V10, "<wsa:ReplyTo><wsa:Address>%s</wsa:Address></wsa:ReplyTo>" % ns.WSA10_NONE))
    destination = reply_destination(request, fault=False)
    assert is_none_address(destination)
    assert not is_none_address(None)
    assert not is_none_address(EndpointReference("http://x"))


def test_reply_to_unaddressed_request_is_addressed_anyway():
    reply = reply_parsed(None, "urn:r")
    assert reply.version is V10
    assert (reply.action, reply.message_id, reply.relates_to, reply.to) == ("urn:r", PINNED_ID, None, None)
    assert reply_destination(None, fault=False) is None


# --- faults ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
def test_action_not_supported(version):
    fault = action_not_supported(version, "urn:nope")
    assert fault.code == SENDER
    assert fault.subcodes == (version.q("ActionNotSupported"),)
    assert fault.action == version.fault_action
    problem = fault.detail[0]
    assert problem.tag == version.q("ProblemAction")
    assert problem.find(version.q("Action")).text == "urn:nope"


def test_action_not_supported_defaults_to_wsa10_and_empty_action():
    fault = action_not_supported(None, None)
    assert fault.subcodes == (ns.qname(ns.WSA10, "ActionNotSupported"),)
    assert fault.detail[0].find(ns.qname(ns.WSA10, "Action")).text in ("", None)


@pytest.mark.parametrize("version", VERSIONS)
def test_header_required_and_destination_unreachable(version):
    fault = header_required(version, "Action")
    assert fault.subcodes == (version.header_required_fault,)
    assert fault.detail[0].text == "wsa:Action"
    assert fault.detail[0].nsmap["wsa"] == version.namespace
    unreachable = destination_unreachable(version, "http://x/none")
    assert unreachable.subcodes == (version.q("DestinationUnreachable"),)
    assert "http://x/none" in unreachable.reason


# --- reference parameters of an anonymous reply EPR (WSA 1.0 Core 3.4, SOAP binding 2.1) ----

def _ref_blocks(blocks, tag):
    return [b for b in blocks if b.tag == tag]


@pytest.mark.parametrize("version", VERSIONS)
def test_anonymous_reply_to_echoes_its_reference_parameters(version):
    props = ("<wsa:ReferenceProperties><app:Prop>p1</app:Prop></wsa:ReferenceProperties>"
             if version is V2004 else "")
    request = AddressingHeaders.parse(headers_xml(version, f"""
        <wsa:MessageID>{MSG_ID}</wsa:MessageID>
        <wsa:ReplyTo><wsa:Address>{version.anonymous}</wsa:Address>{props}
          <wsa:ReferenceParameters><app:Ctx>r1</app:Ctx><app:More a="1"/></wsa:ReferenceParameters>
        </wsa:ReplyTo>"""))
    assert reply_destination(request, fault=False) is None
    for fault in (False, True):  # no FaultTo: the fault goes to ReplyTo, with its parameters
        blocks = reply_headers(request, "urn:reply", fault=fault)
        ctx, = _ref_blocks(blocks, "{urn:app}Ctx")
        more, = _ref_blocks(blocks, "{urn:app}More")
        assert ctx.text == "r1" and more.get("a") == "1"
        marker = ns.qname(ns.WSA10, "IsReferenceParameter")
        assert ctx.get(marker) == more.get(marker) == ("true" if version is V10 else None)
        if version is V2004:
            prop, = _ref_blocks(blocks, "{urn:app}Prop")
            assert prop.text == "p1"


@pytest.mark.parametrize("version", VERSIONS)
def test_anonymous_fault_to_echoes_its_own_reference_parameters(version):
    request = AddressingHeaders.parse(headers_xml(version, f"""
        <wsa:MessageID>{MSG_ID}</wsa:MessageID>
        <wsa:ReplyTo><wsa:Address>{version.anonymous}</wsa:Address>
          <wsa:ReferenceParameters><app:Ctx>reply</app:Ctx></wsa:ReferenceParameters></wsa:ReplyTo>
        <wsa:FaultTo><wsa:Address>{version.anonymous}</wsa:Address>
          <wsa:ReferenceParameters><app:Ctx>fault</app:Ctx></wsa:ReferenceParameters></wsa:FaultTo>"""))
    assert [b.text for b in _ref_blocks(reply_headers(request, "urn:f", fault=True),
                                        "{urn:app}Ctx")] == ["fault"]
    assert [b.text for b in _ref_blocks(reply_headers(request, "urn:r"), "{urn:app}Ctx")] == ["reply"]


def test_no_reply_to_means_no_reference_parameters():
    request = AddressingHeaders.parse(headers_xml(V10, f"<wsa:MessageID>{MSG_ID}</wsa:MessageID>"
                                                  "<app:Ctx>not-a-reply-param</app:Ctx>"))
    assert _ref_blocks(reply_headers(request, "urn:r"), "{urn:app}Ctx") == []


@pytest.mark.parametrize("action, version", [
    (ns.WSA2004_FAULT_ACTION, V2004),
    ("http://schemas.xmlsoap.org/ws/2004/08/eventing/fault", V2004),
    (ns.WSA10_FAULT_ACTION, V10),
    ("http://www.w3.org/2011/03/ws-evt/fault", V10),
    ("urn:r", V10),
])
def test_reply_to_unaddressed_request_uses_the_actions_addressing_family(action, version):
    reply = reply_parsed(None, action)
    assert reply.version is version
    assert reply.to == (ns.WSA2004_ANONYMOUS if version is V2004 else None)
    assert reply_parsed(None, action).version is version
    assert AddressingHeaders.parse(reply_headers(None, action, default_version=V10)).version is V10


@pytest.mark.parametrize("address", ["http://a.test/n", " urn:x "])
def test_a_plain_epr_is_the_constructors(address):
    plain = EndpointReference.plain(address)
    assert plain == EndpointReference(address) and plain.address == address
    assert plain.reference_parameters == () and plain.reference_properties == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.address = "http://b.test/"


@pytest.mark.parametrize("address", ["", "  \t", None, b"http://a.test/"])
def test_a_plain_epr_needs_an_address_as_the_constructor_does(address):
    for make in (EndpointReference, EndpointReference.plain):
        with pytest.raises(ValueError):
            make(address)
