"""Event schemas: XML form, validation, reading events, the order-preserving mappings."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from matchers import InvalidSchema, Schema
from matchers.schema.codecs import (
    parse_datetime,
    parse_number,
    prefix_upper_bound,
    string_coordinate,
)
from matchers.schema.intervals import Interval
from matchers.vocabulary import EDN

SCHEMA_XML = f"""
<edn:Schema xmlns:edn="{EDN}" xmlns:q="urn:quotes">
  <edn:Attribute name="price"  type="number"   xpath="/q:quote/q:price" min="0" max="1000"/>
  <edn:Attribute name="symbol" type="string"   xpath="/q:quote/q:symbol"/>
  <edn:Attribute name="time"   type="dateTime" xpath="/q:quote/@time"
                 min="2000-01-01T00:00:00Z" max="2100-01-01T00:00:00Z"/>
</edn:Schema>"""


@pytest.fixture
def schema():
    return Schema.from_element(etree.fromstring(SCHEMA_XML))


def quote(body: str, attributes: str = "") -> etree._Element:
    return etree.fromstring(f'<q:quote xmlns:q="urn:quotes"{attributes}>{body}</q:quote>')


def test_from_element_reads_attributes_types_domains_and_namespaces(schema):
    assert schema.dims == ("price", "symbol", "time")
    price, symbol, time = schema.attributes
    assert (price.type, price.min, price.max) == ("number", 0.0, 1000.0)
    assert price.namespaces == (("q", "urn:quotes"),)  # only the prefixes the xpath uses
    assert symbol.min is None and symbol.domain == (0.0, pytest.approx(1.0))
    assert time.min == parse_datetime("2000-01-01T00:00:00Z")
    assert schema.dim("time") == 2 and "symbol" in schema and "volume" not in schema


def test_element_round_trip(schema):
    again = Schema.from_element(schema.to_element())
    assert again == schema
    assert Schema.from_element(etree.fromstring(etree.tostring(again.to_element()))) == schema


@pytest.mark.parametrize("attribute, message", [
    ('name="1x" xpath="/a" min="0" max="1"', "not a name"),
    ('name="and" xpath="/a" min="0" max="1"', "reserved"),
    ('name="x" type="color" xpath="/a"', "not one of"),
    ('name="x" xpath="/a"', "need min and max"),
    ('name="x" xpath="/a" min="5" max="1"', "below max"),
    ('name="x" xpath="/a" min="0" max="inf"', "does not parse"),
    ('name="x" type="string" xpath="/a" min="a"', "take no min/max"),
    ('name="x" xpath="/a[" min="0" max="1"', "xpath"),
    ('name="x" xpath="" min="0" max="1"', "no xpath"),
])
def test_invalid_attributes(attribute, message):
    element = etree.fromstring(f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute {attribute}/></edn:Schema>')
    with pytest.raises(InvalidSchema, match=message):
        Schema.from_element(element)


def test_duplicate_names_and_foreign_children_are_refused():
    twice = (f'<edn:Schema xmlns:edn="{EDN}"><edn:Attribute name="a" xpath="/a" min="0" max="1"/>'
             '<edn:Attribute name="a" xpath="/b" min="0" max="1"/></edn:Schema>')
    with pytest.raises(InvalidSchema, match="unique"):
        Schema.from_element(etree.fromstring(twice))
    with pytest.raises(InvalidSchema, match="unexpected element"):
        Schema.from_element(etree.fromstring(f'<edn:Schema xmlns:edn="{EDN}"><x/></edn:Schema>'))


def test_from_config_forms(schema):
    options = etree.fromstring(f'<adm:Options xmlns:adm="urn:wsframework:admin">{SCHEMA_XML}</adm:Options>')
    assert Schema.from_config(options) == schema
    assert Schema.from_config(schema) is schema
    assert Schema.from_config(None) == Schema() and Schema.from_config(object()).d == 0
    with pytest.raises(InvalidSchema, match="carry no"):
        Schema.from_config(etree.fromstring("<options/>"))


def test_extract_point_event(schema):
    box = schema.extract(quote("<q:price>42</q:price><q:symbol>GE</q:symbol>",
                               ' time="2024-05-01T10:00:00Z"'))
    assert box.values == ((42.0, 42.0), ("GE", "GE"), (parse_datetime("2024-05-01T10:00:00Z"),) * 2)
    assert box.clean and box.is_point
    assert box.lo[0] == 42.0 and box.lo[1] == string_coordinate("GE")


def test_absent_attributes_sit_on_null(schema):
    box = schema.extract(quote("<q:price>abc</q:price>"))
    assert box.values == (None, None, None)
    assert np.array_equal(box.lo, schema.null) and np.array_equal(box.hi, schema.null)
    assert np.all(schema.null < schema.domain_lo)


def test_values_outside_the_domain_are_clamped_and_unclean(schema):
    box = schema.extract(quote("<q:price>1500</q:price>"))
    assert box.values[0] == (1500.0, 1500.0) and box.lo[0] == 1000.0 and not box.clean
    assert not schema.extract(quote("<q:price>-1</q:price>")).clean


def test_hypercube_event_from_min_max_attributes(schema):
    box = schema.extract(quote('<q:price min="10" max="20"/><q:symbol min="A" max="C"/>'))
    assert box.values[:2] == ((10.0, 20.0), ("A", "C"))
    assert (box.lo[0], box.hi[0]) == (10.0, 20.0) and not box.is_point
    half = schema.extract(quote('<q:price min="10"/>'))
    assert half.values[0] == (10.0, None) and half.hi[0] == 1000.0 and half.clean
    assert schema.extract(quote('<q:price min="30" max="20"/>')).values[0] is None
    # Text wins over min/max: XPath sees the text too.
    assert schema.extract(quote('<q:price min="1" max="2">50</q:price>')).values[0] == (50.0, 50.0)


def test_several_nodes_make_a_hull_and_unparseable_ones_are_skipped(schema):
    box = schema.extract(quote("<q:price>30</q:price><q:price>x</q:price><q:price>10</q:price>"))
    assert box.values[0] == (10.0, 30.0)


def test_strings_are_taken_verbatim(schema):
    assert schema.extract(quote("<q:symbol> GE </q:symbol>")).values[1] == (" GE ", " GE ")
    assert schema.extract(quote("<q:symbol>G<b>E</b></q:symbol>")).values[1] == ("GE", "GE")


def test_number_syntax():
    assert parse_number(" 1.5 ") == 1.5 and parse_number("-2e3") == -2000.0
    assert parse_number("+.5") == 0.5
    for bad in ("inf", "nan", "1_000", "0x10", "", "1e999", "5 5"):
        assert parse_number(bad) is None


def test_datetime_naive_is_utc():
    assert parse_datetime("2024-01-01T00:00:00") == parse_datetime("2024-01-01T00:00:00Z")
    assert parse_datetime("2024-01-01T01:00:00+01:00") == parse_datetime("2024-01-01T00:00:00Z")
    assert parse_datetime("yesterday") is None


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=10), st.text(max_size=10))
def test_string_coordinate_preserves_order(a, b):
    if a <= b:
        assert string_coordinate(a) <= string_coordinate(b)
    assert 0.0 <= string_coordinate(a) < 1.0


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=4), st.text(max_size=6))
def test_prefix_upper_bound(prefix, text):
    upper = prefix_upper_bound(prefix)
    inside = prefix <= text and (upper is None or text < upper)
    assert inside == text.startswith(prefix)


def test_prefix_upper_bound_carries():
    top = chr(0x10FFFF)
    assert prefix_upper_bound("a" + top) == "b"
    assert prefix_upper_bound(top) is None and prefix_upper_bound("") is None


def test_interval_algebra():
    closed = Interval(1, False, 5, False)
    assert closed.overlaps(5, 5) and not Interval(1, False, 5, True).overlaps(5, 5)
    assert Interval(1, True, 5, False).overlaps(0, 1) is False
    assert closed.overlaps(None, 1) and closed.overlaps(5, None) and Interval().overlaps(None, None)
    assert closed.intersect(Interval(5, True)).empty
    assert closed.intersect(Interval(3, False, None, False)) == Interval(3, False, 5, False)


def test_box_of_constraints(schema):
    lo, hi, exact = schema.box({0: Interval(10.0, False, 20.0, False)})
    assert (lo[0], hi[0]) == (10.0, 20.0) and exact
    assert lo[1] == schema.null[1] and hi[1] == schema.domain_hi[1]
    _, _, exact = schema.box({0: Interval(10.0, True, 20.0, False)})
    assert not exact
    lo, hi, exact = schema.box({0: Interval(2000.0, False, None, False)})
    assert (lo[0], hi[0]) == (1000.0, 1000.0) and not exact  # clamped: needs the exact check
    lo, hi, exact = schema.box({1: Interval()})  # exists
    assert (lo[1], hi[1]) == schema.attributes[1].domain and exact


def test_compiled_xpaths_are_reused(schema):
    first = schema._compiled
    schema.extract(quote("<q:price>1</q:price>"))
    assert schema._compiled is first and len(first) == 3
    assert math.isclose(schema.null[0], -1000.0)
