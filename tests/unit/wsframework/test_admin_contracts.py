"""Admin message contracts: round trips, validation, Options pass-through, extension."""

import pytest
from lxml import etree
from spyne import Unicode

from wsframework import admin as ac
from wsframework import ns
from wsframework.admin import (
    ContractError, CreateTopic, CreateTopicResponse, DeleteTopic,
    DeleteTopicResponse, ListTopics, ListTopicsResponse, TopicInfo, parse_request,
    parse_response, register_contract, render, reset_contracts, unregister_contract)

OWNERS_NS = "urn:example:owners"


def adm(local):
    return "{%s}%s" % (ns.ADMIN, local)


def xml(text):
    return etree.fromstring(text)


def request(body):
    return xml('<adm:CreateTopic xmlns:adm="%s" xmlns:o="%s">%s</adm:CreateTopic>'
               % (ns.ADMIN, OWNERS_NS, body))


@pytest.fixture(autouse=True)
def _fresh_registry():
    reset_contracts()
    yield
    reset_contracts()


class OwnedCreateTopic(CreateTopic):
    """The extension story: an application element in the application's namespace."""

    __namespace__ = OWNERS_NS
    _type_info = [("Owner", Unicode(min_occurs=1, nillable=False))]


# --- constants ---------------------------------------------------------------------

def test_actions_and_qnames():
    assert ac.action_for("CreateTopic") == "urn:wsframework:admin/CreateTopic"
    assert ac.action_for("CreateTopicResponse") == "urn:wsframework:admin/CreateTopicResponse"
    assert ac.ADMIN_TOKEN_QNAME == "{urn:wsframework:admin}AdminToken"
    assert ac.REQUEST_ACTIONS == {
        adm(name): f"urn:wsframework:admin/{name}" for name, _, _ in ac.OPERATIONS}
    assert {adm("CreateTopic"), adm("DeleteTopic"), adm("ListTopics")} <= set(ac.REQUEST_ACTIONS)
    assert ac.RESPONSE_ACTIONS[adm("ListTopicsResponse")] == \
        "urn:wsframework:admin/ListTopicsResponse"
    faults = [ac.FAULT_ACCESS_DENIED, ac.FAULT_TOPIC_EXISTS, ac.FAULT_UNKNOWN_TOPIC,
              ac.FAULT_UNKNOWN_MATCHER, ac.FAULT_INVALID_NAME, ac.FAULT_INVALID_REQUEST]
    assert [etree.QName(f).localname for f in faults] == [
        "AccessDenied", "TopicExists", "UnknownTopic", "UnknownMatcher", "InvalidName",
        "InvalidRequest"]
    assert {etree.QName(f).namespace for f in faults} == {ns.ADMIN}
    assert ac.KNOWN_MATCHER_QNAME == adm("KnownMatcher")


@pytest.mark.parametrize("bad", ["", "a/b", "{urn:x}A"])
def test_action_for_wants_a_message_name(bad):
    with pytest.raises(ValueError):
        ac.action_for(bad)


def test_element_qname_of_classes_instances_and_subclasses():
    assert ac.element_qname(CreateTopic) == adm("CreateTopic")
    assert ac.element_qname(OwnedCreateTopic(Name="a")) == adm("CreateTopic")
    assert ac.element_qname(ListTopicsResponse) == adm("ListTopicsResponse")
    with pytest.raises(TypeError):
        ac.element_qname(TopicInfo)


# --- round trips -------------------------------------------------------------------

REQUESTS = [
    CreateTopic(Name="stocks/quotes"),
    CreateTopic(Name="stocks/quotes", Matcher="urn:matchers:rtree",
                Options=xml('<cfg xmlns="urn:rtree"><dims>8</dims></cfg>')),
    DeleteTopic(Name="stocks/quotes"),
    ListTopics(),
    ListTopics(Prefix="stocks/"),
]
RESPONSES = [
    CreateTopicResponse(Name="a/b", Matcher="urn:m", Address="http://h/topics/a/b"),
    DeleteTopicResponse(Name="a/b"),
    ListTopicsResponse(Topic=[]),
    ListTopicsResponse(Topic=[
        TopicInfo(Name="a", Matcher="urn:m", Address="http://h/topics/a", FilterCount=0),
        TopicInfo(Name="b/c", Matcher="urn:n", Address="http://h/topics/b/c", FilterCount=12),
    ]),
]


@pytest.mark.parametrize("message", REQUESTS, ids=repr)
def test_request_round_trip(message):
    element = render(message)
    assert element.tag == ac.element_qname(message)
    assert all(child.tag.startswith("{%s}" % ns.ADMIN) for child in element)
    assert parse_request(element) == message
    # through bytes as well, as it travels
    assert parse_request(xml(etree.tostring(element))) == message


@pytest.mark.parametrize("message", RESPONSES, ids=repr)
def test_response_round_trip(message):
    element = render(message)
    assert element.tag == ac.element_qname(message)
    assert parse_response(xml(etree.tostring(element))) == message


def test_rendered_wire_form():
    element = render(ListTopicsResponse(Topic=[TopicInfo(
        Name="a", Matcher="urn:m", Address="http://h/topics/a", FilterCount=3)]))
    assert element.getparent() is None
    assert [c.tag for c in element] == [adm("Topic")]
    assert [c.tag for c in element[0]] == [adm(n) for n in
                                           ("Name", "Matcher", "Address", "FilterCount")]
    assert element[0].findtext(adm("FilterCount")) == "3"


def test_parse_of_hand_written_request():
    message = parse_request(xml(
        '<CreateTopic xmlns="urn:wsframework:admin"><Name>x/y</Name>'
        '<Matcher>http://www.w3.org/TR/1999/REC-xpath-19991116</Matcher></CreateTopic>'))
    assert type(message) is CreateTopic
    assert (message.Name, message.Matcher, message.Options) == \
        ("x/y", "http://www.w3.org/TR/1999/REC-xpath-19991116", None)


def test_list_topics_without_topics_gives_an_empty_list():
    parsed = parse_response(xml('<ListTopicsResponse xmlns="%s"/>' % ns.ADMIN))
    assert parsed.Topic == []


def test_requests_and_responses_are_separate():
    with pytest.raises(ContractError):
        parse_request(render(DeleteTopicResponse(Name="a")))
    with pytest.raises(ContractError):
        parse_response(render(DeleteTopic(Name="a")))


# --- Options: any XML --------------------------------------------------------------

def test_options_pass_arbitrary_xml_through():
    options = ('<e:engine xmlns:e="urn:engine" e:mode="fast">'
               '<e:dims>8</e:dims><!-- why --><other xmlns="urn:other" a="1">text</other>'
               '</e:engine>')
    message = parse_request(request('<adm:Name>t</adm:Name><adm:Options>%s</adm:Options>'
                                    % options))
    assert isinstance(message.Options, etree._Element)
    assert etree.tostring(message.Options, method="c14n", exclusive=True) == \
        etree.tostring(xml(options), method="c14n", exclusive=True)


def test_empty_options_is_none():
    assert parse_request(request("<adm:Name>t</adm:Name><adm:Options/>")).Options is None


def test_render_does_not_move_the_callers_options():
    options = xml("<cfg xmlns='urn:c'/>")
    message = CreateTopic(Name="t", Options=options)
    render(message)
    render(message)
    assert message.Options is options and options.getparent() is None


@pytest.mark.parametrize("options", ["<a/><b/>", "just text"])
def test_options_hold_exactly_one_element(options):
    with pytest.raises(ContractError, match="Options"):
        parse_request(request("<adm:Name>t</adm:Name><adm:Options>%s</adm:Options>" % options))


# --- validation ----------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    "",                                                   # no Name
    "<adm:Matcher>urn:m</adm:Matcher>",                   # no Name
    "<adm:Name/>",                                        # empty Name
    "<adm:Name>a</adm:Name><adm:Name>b</adm:Name>",       # two Names
    "<o:Name>a</o:Name>",                                 # Name in the wrong namespace
    "<Name>a</Name>",                                     # unqualified Name
    '<adm:Name xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:nil="true"/>',
    "<adm:Name>a</adm:Name><adm:Matcher>u</adm:Matcher><adm:Matcher>v</adm:Matcher>",
])
def test_invalid_create_topic(body):
    with pytest.raises(ContractError) as info:
        parse_request(request(body))
    assert info.value.reason.startswith("CreateTopic")
    assert isinstance(info.value, ValueError)


def test_missing_name_says_so():
    with pytest.raises(ContractError, match="Name is required"):
        parse_request(xml('<DeleteTopic xmlns="%s"/>' % ns.ADMIN))


@pytest.mark.parametrize("element", [
    '<Frobnicate xmlns="urn:wsframework:admin"/>',
    '<CreateTopic xmlns="urn:other"><Name>a</Name></CreateTopic>',
    '<CreateTopic><Name>a</Name></CreateTopic>',
])
def test_unknown_element(element):
    with pytest.raises(ContractError, match="not an admin request"):
        parse_request(xml(element))


def test_comment_is_not_a_request():
    with pytest.raises(ContractError):
        parse_request(etree.Comment("hi"))


@pytest.mark.parametrize("count", ["many", "1.5", "-1", "99999999999", ""])
def test_malformed_filter_count(count):
    element = xml(
        '<ListTopicsResponse xmlns="%s"><Topic><Name>a</Name><Matcher>urn:m</Matcher>'
        '<Address>http://h/a</Address><FilterCount>%s</FilterCount></Topic>'
        '</ListTopicsResponse>' % (ns.ADMIN, count))
    with pytest.raises(ContractError, match="ListTopicsResponse"):
        parse_response(element)


def test_xsi_type_cannot_choose_the_class():
    element = request('<adm:Name>a</adm:Name>')
    element.set("{http://www.w3.org/2001/XMLSchema-instance}type", "adm:ListTopics")
    assert type(parse_request(element)) is CreateTopic


def test_unknown_children_are_ignored_and_input_left_alone():
    element = request('<adm:Name>a</adm:Name><adm:Colour>red</adm:Colour>'
                      '<o:Owner>ann</o:Owner><!-- c --><?pi x?>')
    before = etree.tostring(element)
    assert parse_request(element) == CreateTopic(Name="a")
    assert etree.tostring(element) == before


@pytest.mark.parametrize("message, reason", [
    (CreateTopic(), "Name is required"),
    (CreateTopicResponse(Name="a", Matcher="urn:m"), "Address is required"),
    (ListTopicsResponse(Topic=[TopicInfo(Name="a", Matcher="m", Address="x")]),
     "FilterCount is required"),
    (ListTopicsResponse(Topic=["a"]), "Topic must be a TopicInfo"),
    (CreateTopic(Name="a", Options="<x/>"), "Options must be an lxml element"),
])
def test_render_refuses_incomplete_messages(message, reason):
    with pytest.raises(ContractError, match=reason):
        render(message)


def test_render_refuses_non_contracts():
    with pytest.raises(ContractError):
        render(TopicInfo(Name="a"))
    with pytest.raises(ContractError):
        render("CreateTopic")


# --- extension -----------------------------------------------------------------------

OWNED = '<adm:Name>a/b</adm:Name><adm:Matcher>urn:m</adm:Matcher><o:Owner>ann</o:Owner>'


def test_registered_extension_parses_into_the_subclass():
    register_contract(OwnedCreateTopic)
    message = parse_request(request(OWNED))
    assert type(message) is OwnedCreateTopic
    assert (message.Name, message.Matcher, message.Owner) == ("a/b", "urn:m", "ann")
    assert isinstance(message, CreateTopic)  # base handlers keep working


def test_extension_renders_under_the_base_element_name():
    register_contract(OwnedCreateTopic)
    element = render(OwnedCreateTopic(Name="a/b", Owner="ann"))
    assert element.tag == adm("CreateTopic")
    assert [c.tag for c in element] == [adm("Name"), "{%s}Owner" % OWNERS_NS]
    assert parse_request(element) == OwnedCreateTopic(Name="a/b", Owner="ann")


def test_extension_validates_its_own_fields():
    register_contract(OwnedCreateTopic)
    with pytest.raises(ContractError, match="Owner is required"):
        parse_request(request("<adm:Name>a</adm:Name>"))
    with pytest.raises(ContractError, match="Owner is required"):  # Owner in ns.ADMIN
        parse_request(request("<adm:Name>a</adm:Name><adm:Owner>ann</adm:Owner>"))
    with pytest.raises(ContractError, match="Name is required"):
        parse_request(request("<o:Owner>ann</o:Owner>"))


def test_base_server_ignores_extensions_it_does_not_know():
    register_contract(OwnedCreateTopic)
    reset_contracts()
    message = parse_request(request(OWNED))
    assert type(message) is CreateTopic
    assert (message.Name, message.Matcher) == ("a/b", "urn:m")


def test_unregister_restores_the_base():
    register_contract(OwnedCreateTopic)
    unregister_contract(OwnedCreateTopic)
    assert type(parse_request(request(OWNED))) is CreateTopic
    unregister_contract(OwnedCreateTopic)  # idempotent


def test_extension_in_the_admin_namespace():
    class TaggedDeleteTopic(DeleteTopic):  # no __namespace__: inherits ns.ADMIN
        _type_info = [("Reason", Unicode(nillable=False))]

    register_contract(TaggedDeleteTopic)
    element = xml('<DeleteTopic xmlns="%s"><Name>a</Name><Reason>old</Reason></DeleteTopic>'
                  % ns.ADMIN)
    message = parse_request(element)
    assert type(message) is TaggedDeleteTopic and message.Reason == "old"
    assert render(message)[1].tag == adm("Reason")


def test_response_extension():
    class CountedDeleteTopicResponse(DeleteTopicResponse):
        __namespace__ = OWNERS_NS
        _type_info = [("Dropped", ac.Integer32(nillable=False))]

    register_contract(CountedDeleteTopicResponse, request=False)
    element = render(CountedDeleteTopicResponse(Name="a", Dropped=4))
    parsed = parse_response(element)
    assert type(parsed) is CountedDeleteTopicResponse and parsed.Dropped == 4
    assert type(parse_request(xml('<DeleteTopic xmlns="%s"><Name>a</Name></DeleteTopic>'
                                  % ns.ADMIN))) is DeleteTopic


def test_registration_rules():
    class OtherCreateTopic(CreateTopic):
        __namespace__ = "urn:example:other"
        _type_info = [("Colour", Unicode)]

    class MoreOwnedCreateTopic(OwnedCreateTopic):
        _type_info = [("Team", Unicode)]

    assert register_contract(OwnedCreateTopic) is OwnedCreateTopic
    register_contract(OwnedCreateTopic)  # again: fine
    with pytest.raises(ValueError, match="already extended"):
        register_contract(OtherCreateTopic)
    register_contract(MoreOwnedCreateTopic)  # refines the registered one
    assert type(parse_request(request(OWNED))) is MoreOwnedCreateTopic
    with pytest.raises(TypeError):
        register_contract(OwnedCreateTopic, request=False)
    with pytest.raises(TypeError):
        register_contract(TopicInfo)
    with pytest.raises(TypeError):
        register_contract(str)


# --- messages of one's own -----------------------------------------------------------------

PING_NS = "urn:example:ping"


class Ping(ac.Contract):
    __namespace__ = PING_NS
    _type_info = [("Text", ac.required(ac.Unicode)), ("Count", ac.optional(ac.Integer32))]


class PingResponse(ac.Contract):
    __namespace__ = PING_NS
    _type_info = [("Text", ac.repeated(ac.Unicode))]


register_contract(Ping, element="{%s}Ping" % PING_NS)
register_contract(PingResponse, request=False, element="{%s}PingResponse" % PING_NS)


def test_declared_message_round_trips_under_its_element():
    element = render(Ping(Text="hi", Count=2))
    assert element.tag == "{%s}Ping" % PING_NS
    assert [c.tag for c in element] == ["{%s}Text" % PING_NS, "{%s}Count" % PING_NS]
    assert parse_request(xml(etree.tostring(element))) == Ping(Text="hi", Count=2)
    assert parse_response(render(PingResponse(Text=["a", "b"]))).Text == ["a", "b"]
    assert ac.action_for("Ping", PING_NS) == "urn:example:ping/Ping"
    with pytest.raises(ContractError, match="Text is required"):
        parse_request(xml('<Ping xmlns="%s"/>' % PING_NS))


def test_declarations_survive_reset_and_unregister():
    reset_contracts()
    unregister_contract(Ping)
    assert type(parse_request(render(Ping(Text="x")))) is Ping


def test_declared_message_can_be_extended():
    class LoudPing(Ping):
        __namespace__ = OWNERS_NS
        _type_info = [("Volume", ac.Integer32(nillable=False))]

    register_contract(LoudPing)
    element = render(LoudPing(Text="x", Volume=11))
    assert element.tag == "{%s}Ping" % PING_NS
    assert type(parse_request(element)) is LoudPing


def test_declaration_rules():
    class OtherPing(ac.Contract):
        __namespace__ = PING_NS
        _type_info = [("Text", ac.Unicode)]

    class SubPing(Ping):
        _type_info = [("More", ac.Unicode)]

    assert register_contract(Ping, element="{%s}Ping" % PING_NS) is Ping  # again: fine
    with pytest.raises(ValueError, match="already declared"):
        register_contract(OtherPing, element="{%s}Ping" % PING_NS)
    with pytest.raises(ValueError, match="already declared"):  # a request is not a response
        register_contract(Ping, request=False, element="{%s}Ping" % PING_NS)
    with pytest.raises(ValueError, match="already the contract"):
        register_contract(Ping, element="{%s}Pong" % PING_NS)
    with pytest.raises(ValueError, match="extends"):
        register_contract(SubPing, element="{%s}SubPing" % PING_NS)
    with pytest.raises(ValueError):
        register_contract(OtherPing, element="Ping")
    with pytest.raises(TypeError):
        register_contract(str, element="{%s}Str" % PING_NS)
    with pytest.raises(ContractError, match="not an admin request"):
        parse_request(xml('<Pong xmlns="%s"/>' % PING_NS))
