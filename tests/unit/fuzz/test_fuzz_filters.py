"""Subscribe in every filter dialect with generated filter text: the answer is a
SubscribeResponse or a Sender fault (the filter is the subscriber's), never a Receiver
fault, an unprescribed 500 or an exception; publication on the topic keeps working."""
from __future__ import annotations

from hypothesis import event as note, given, settings, strategies as st

from benchmarks.robustness.fuzz import hostile_values, quote_event
from route_manager.workloads.grid_xml import event_element
from subscription_manager.client import subscribe_body
from tests.support.eventing import BASE, SINK
from tests.unit.fuzz.fuzzkit import FUZZ, call, check_answer
from wsframework import ns
from matchers.vocabulary import RANGES_DIALECT
from wsframework.addressing import request_headers
from wsframework.exceptions import SENDER
from wsframework.publisher import PUBLISH_ACTION
from wsframework.soap import SoapVersion, build_envelope, parse_envelope
from subscription_manager.versions import VERSIONS

Q = "urn:quotes"
# (version, topic, dialect) of every dialect a role accepts
DIALECTS = [
    ("2004", "stocks", ns.XPATH10_DIALECT_2004),
    ("2011", "stocks", ns.XPATH10_DIALECT_2011),
    ("2011", "stocks", ns.XPATH20_DIALECT_2011),
    ("2011", "stocks", ns.ACTION_DIALECT_DPWS11),
    ("2004", "stocks", ns.ACTION_DIALECT_DPWS2006),
    ("2011", "boxes", RANGES_DIALECT),
    ("2004", "boxes", RANGES_DIALECT),
    ("2011", "boxes", ns.XPATH10_DIALECT_2011),
    ("2011", "grid", RANGES_DIALECT),       # on a subscription server
    ("2011", "stocks", "urn:no-such-dialect"),
]
TOKENS = ["q:price", "q:symbol", "//q:quote", "/", "//", ".", "..", "*", "@symbol", "[", "]", "(",
          ")", " and ", " or ", "not(", "=", "!=", "<", ">=", "1", "-3.5e2", "'GE'", "\"x\"",
          "count(", "string(", "contains(", "sum(", "$v", "some $a in", "satisfies", ",",
          "x0", "x1", "x2", " in [", "price", "symbol", "true()", "re:test(", "fn:matches(",
          "|", "+", "div", "mod", "ancestor::", "following::", "text()", "node()",
          "urn:wsframework:eventing/Publish", "http://x/y", " ", "1e309", "NaN", "'"]
FILTERS = (st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)
           | st.text(max_size=200)
           | st.randoms(use_true_random=False).map(hostile_values))

NAMESPACES = st.sampled_from([{"q": Q}, {}, {"q": "urn:other"}, {"re": "http://exslt.org/regular-expressions", "q": Q},
                              {"fn": "http://www.w3.org/2005/xpath-functions", "q": Q}])


def _clean(text: str) -> str:
    return "".join(c for c in text if c in "\t\n\r" or (" " <= c and not "\ud800" <= c <= "\udfff"
                                                       and c not in "\ufffe\uffff"))


def _post(app, url, action, body, version, soap=SoapVersion.SOAP12):
    headers = request_headers(VERSIONS[version].wsa, url, action)
    envelope = build_envelope(soap, body, headers)
    return call(app, "/" + url.split("/", 3)[3], envelope, content_type=soap.content_type + f'; action="{action}"')


@settings(FUZZ, max_examples=100)
@given(st.sampled_from(DIALECTS), FILTERS, NAMESPACES, st.booleans())
def test_generated_filters_are_accepted_or_refused_as_the_senders(roles, case, text, namespaces,
                                                                  with_dialect):
    version, topic, dialect = case
    v = VERSIONS[version]
    body = subscribe_body(v, SINK + "/filtered", filter=_clean(text),
                          dialect=dialect if with_dialect else None, namespaces=namespaces,
                          expires="PT10M")
    if topic == "grid":
        app, base = roles.apps["s0"], "http://s0.test"
    else:
        app, base = roles.apps["source"], BASE
    answer = _post(app, f"{base}/topics/{topic}", v.action("Subscribe"), body, version)
    check_answer(answer)
    envelope = parse_envelope(answer.body)
    fault = envelope.fault()
    if fault is not None:
        assert fault.code == SENDER, (text, fault)
        note(f"refused {dialect.rsplit(chr(47), 1)[-1]}")
    else:
        manager = envelope.body.find(v.q("SubscriptionManager"))
        assert manager is not None
        note(f"accepted {dialect.rsplit(chr(47), 1)[-1]}")
    # the topic still takes publications
    event = quote_event(42) if topic == "stocks" else event_element([3.0, 3.0, 3.0], 1)
    published = _post(app if topic != "grid" else roles.apps["dispatcher"],
                      f"{base if topic != 'grid' else 'http://dispatcher.test'}/topics/{topic}",
                      PUBLISH_ACTION, event, "2011")
    assert published.status in (200, 202), published
    roles.still_answers()
