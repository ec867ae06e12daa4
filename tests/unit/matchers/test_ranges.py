"""The range filter dialect: grammar, errors, binding to a schema, meaning."""

import pytest
from hypothesis import given, settings
from lxml import etree

from matchers import FilterSpec, InvalidFilter, Schema, UnsupportedDialect
from matchers.ranges import (
    MAX_RECTANGLES,
    RANGES_DIALECT,
    Predicate,
    bind_range_filter,
    parse_range_filter,
)
from matchers.box_filters import compile_filter
from matchers.schema import Attribute, InvalidSchema
from matchers.schema.codecs import parse_datetime, string_coordinate
from matchers.vocabulary import EDN

from test_matcher_properties import RANGE_FILTER  # shared strategy (same directory)

Q = (("q", "urn:quotes"),)
SCHEMA = Schema((
    Attribute("price", "number", "/q:quote/q:price", Q, 0, 1000),
    Attribute("symbol", "string", "/q:quote/q:symbol", Q),
    Attribute("volume", "number", "/q:quote/@volume", Q, 0, 1e9),
    Attribute("time", "dateTime", "/q:quote/@time", Q, parse_datetime("2000-01-01T00:00:00Z"),
              parse_datetime("2100-01-01T00:00:00Z")),
))


def quote(body: str = "", attributes: str = "") -> etree._Element:
    return etree.fromstring(f'<q:quote xmlns:q="urn:quotes"{attributes}>{body}</q:quote>')


def matches(text: str, event: etree._Element) -> bool:
    compiled = compile_filter(FilterSpec(RANGES_DIALECT, text), SCHEMA)
    return compiled.check(event, SCHEMA.extract(event), None)


def test_the_documented_example_parses_into_two_rectangles():
    parsed = parse_range_filter("price >= 30 and price < 50 and symbol = 'GE' or symbol ^= 'IB'")
    assert parsed.conjunctions == (
        (Predicate("price", ">=", 30.0), Predicate("price", "<", 50.0), Predicate("symbol", "=", "GE")),
        (Predicate("symbol", "^=", "IB"),),
    )
    compiled = bind_range_filter(parsed, SCHEMA)
    assert compiled.mins.shape == (2, 4) and not compiled.box_exact
    assert compiled.mins[0, 0] == 30.0 and compiled.maxs[0, 0] == 50.0
    assert compiled.mins[0, 1] == compiled.maxs[0, 1] == string_coordinate("GE")


@pytest.mark.parametrize("text, canonical", [
    ("volume exists", "volume exists"),
    ("price in [10, 20)", "price in [10.0, 20.0)"),
    ("price in (10,20]", "price in (10.0, 20.0]"),
    ("30 <= price", "price >= 30.0"),
    ("30 > price", "price < 30.0"),
    ("price == 5", "price = 5.0"),
    ("symbol = 'O''Brien'", "symbol = 'O''Brien'"),
    ('symbol = "say ""hi"""', "symbol = 'say \"hi\"'"),
    ("symbol = 'GE' and (price < 10 or price > 90)",
     "symbol = 'GE' and price < 10.0 or symbol = 'GE' and price > 90.0"),
    ("(price > 1)", "price > 1.0"),
    ("price>-1.5e1", "price > -15.0"),
])
def test_syntax(text, canonical):
    parsed = parse_range_filter(text)
    assert parsed.to_text() == canonical
    assert parse_range_filter(parsed.to_text()) == parsed


@settings(max_examples=100, deadline=None)
@given(RANGE_FILTER)
def test_canonical_text_round_trips(text):
    parsed = parse_range_filter(text)
    assert parse_range_filter(parsed.to_text()) == parsed


@pytest.mark.parametrize("text, message", [
    ("", "empty filter"),
    ("   ", "empty filter"),
    ("price >", "column 8: expected a value after '>', found the end of the filter"),
    ("price 5", "column 7: expected a comparison operator, 'in', '^=' or 'exists' after 'price'"),
    ("price AND volume exists", "keywords are lower case"),
    ("price != 3", "'!=' is not supported"),
    ("not price > 3", "'not' is not supported"),
    ("(price > 3", "expected ')' closing the '(' at column 1"),
    ("price in [1, 2", "expected ']' or ')' closing the interval"),
    ("price in 1, 2]", "expected '[' or '(' starting an interval"),
    ("price @ 3", "column 7: unexpected character '@'"),
    ("symbol ^= 3", "expected a string literal after '^='"),
    ("price > 3 volume exists", "expected 'and', 'or' or the end of the filter"),
    ("and", "expected an attribute name, a literal or '('"),
    ("3 < 4", "expected an attribute name"),
])
def test_syntax_errors_say_where_and_what(text, message):
    with pytest.raises(InvalidFilter) as info:
        parse_range_filter(text)
    assert message in info.value.reason


@pytest.mark.parametrize("text, message", [
    ("colour = 'red'", "unknown attribute 'colour' (the schema's attributes: price, symbol, volume, time)"),
    ("price > 'x'", "price is a number"),
    ("symbol > 3", "symbol is a string"),
    ("price ^= 'a'", "'^=' (prefix) needs a string attribute"),
    ("time > 'yesterday'", "is not a dateTime"),
    ("price > 50 and price < 40", "can never match"),
    ("price in (5, 5]", "can never match"),
])
def test_binding_errors(text, message):
    with pytest.raises(InvalidFilter) as info:
        bind_range_filter(parse_range_filter(text), SCHEMA)
    assert message in info.value.reason


def test_too_many_rectangles():
    text = " and ".join(["(price < 1 or price > 2)"] * 7)  # 2^7 = 128 alternatives
    with pytest.raises(InvalidFilter, match=str(MAX_RECTANGLES)):
        parse_range_filter(text)


def test_no_schema_means_no_range_filters():
    with pytest.raises(InvalidFilter, match="without a schema"):
        compile_filter(FilterSpec(RANGES_DIALECT, "price > 1"), Schema())


def test_other_dialects_are_refused():
    with pytest.raises(UnsupportedDialect):
        compile_filter(FilterSpec("urn:nope", "x"), SCHEMA)


def test_numeric_semantics():
    event = quote("<q:price>30</q:price>")
    assert matches("price >= 30", event) and not matches("price > 30", event)
    assert matches("price in [30, 40)", event) and not matches("price in (30, 40)", event)
    assert matches("price = 30", event) and matches("30 = price", event)
    assert not matches("price = 30.0000001", event)


def test_exists_and_absent_attributes():
    event = quote("<q:price>30</q:price>")
    assert matches("price exists", event) and not matches("volume exists", event)
    assert not matches("volume < 5", event)  # an absent attribute satisfies no predicate
    assert matches("volume < 5 or price > 1", event)


def test_string_semantics_including_collisions_beyond_six_bytes():
    event = quote("<q:symbol>AAAAAAx</q:symbol>")
    assert matches("symbol = 'AAAAAAx'", event)
    assert not matches("symbol = 'AAAAAAy'", event)  # same coordinate, exact check says no
    assert matches("symbol ^= 'AAAAAA'", event) and not matches("symbol ^= 'AAAAAAy'", event)
    assert matches("symbol < 'AAAAAAy'", event) and matches("symbol >= 'AAAAAA'", event)
    assert matches("symbol ^= ''", event)


def test_datetime_semantics():
    event = quote(attributes=' time="2024-01-15T12:00:00Z"')
    assert matches("time >= '2024-01-01T00:00:00Z' and time < '2024-02-01T00:00:00Z'", event)
    assert not matches("time < '2024-01-15T12:00:00Z'", event)
    assert matches("time = '2024-01-15T13:00:00+01:00'", event)


def test_hypercube_events_match_by_intersection():
    event = quote('<q:price min="10" max="20"/>')
    assert matches("price = 15", event)  # symmetric case: a point inside the event's box
    assert matches("price > 19 and price < 25", event)
    assert not matches("price > 20", event) and matches("price >= 20", event)
    assert matches("price in [0, 10]", event) and not matches("price in [0, 10)", event)


def test_box_exactness():
    assert bind_range_filter(parse_range_filter("price in [1, 2] and volume exists"), SCHEMA).box_exact
    for text in ("price in [1, 2)", "symbol = 'x'", "price > 2000", "time > '2020-01-01T00:00:00Z'"):
        assert not bind_range_filter(parse_range_filter(text), SCHEMA).box_exact, text


@pytest.mark.parametrize("text", ["9999-12-31T23:00:00-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_datetime_outside_the_years_a_utc_datetime_holds_does_not_parse(text):
    """Such a bound would be accepted, then fail when the schema is written back."""
    def schema(low, high):
        return etree.fromstring(f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute name="t" '
                                f'type="dateTime" xpath="@t" min="{low}" max="{high}"/>'
                                f'</edn:Schema>')
    assert parse_datetime(text) is None
    with pytest.raises(InvalidSchema, match="does not parse"):
        Schema.from_element(schema("2000-01-01T00:00:00Z", text) if text.startswith("9")
                            else schema(text, "2000-01-01T00:00:00Z"))
    # the first and the last second a UTC datetime holds are written back
    first, last = "0001-01-01T00:00:00", "9999-12-31T23:59:59"
    written = etree.tostring(Schema.from_element(schema(first + "Z", last + "Z")).to_element())
    assert first.encode() in written and last.encode() in written
