"""A range filter's packed rectangles (``packed_filter``) load into another engine without
compiling, and give the same answers as compiling; a form from another schema, or a damaged
one, is compiled from the filter's text instead. In process."""
from __future__ import annotations

import numpy as np
import pytest

from matchers import FilterSpec, RTreeMatchingEngine
from matchers.packed_boxes import _rows, pack, prefix_for, unpack
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Schema
from route_manager.workloads.grid_xml import event_element, range_filter, schema_element
from tests.support.compiles import count_compiles
from tests.support.edn import random_boxes, random_points
from wsframework.matching import Matcher
from wsframework.matching.packed_forms import PackedForms
from wsframework.ns import XPATH10_DIALECT_2011

D = 3


def _specs(n: int, seed: int = 1) -> list[tuple[str, FilterSpec]]:
    lo, hi = random_boxes(n, D, seed)
    specs = [(f"f{i}", FilterSpec(RANGES_DIALECT, range_filter(lo[i], hi[i]))) for i in range(n)]
    # two alternatives: a filter of two rectangles
    specs.append(("two", FilterSpec(RANGES_DIALECT, "(x0 in [1.0, 2.0] and x1 in [1.0, 2.0]) "
                                                    "or (x0 in [7.0, 9.0] and x2 in [0.5, 3.0])")))
    return specs


def _answers(engine, seed: int = 2) -> list[list[str]]:
    return engine.match_many([event_element(p, k) for k, p in enumerate(random_points(300, D, seed))])


@pytest.fixture
def compiled():
    engine = RTreeMatchingEngine(schema_element(D))
    engine.add_filters(_specs(200))
    return engine


@pytest.fixture
def compiles(monkeypatch):
    return count_compiles(monkeypatch)


def _forms(engine, specs):
    return [(i, spec, engine.packed_filter(i)) for i, spec in specs]


def _packed(forms) -> PackedForms:
    packed = PackedForms()
    for form in forms:
        packed.append(form)
    return packed


def test_packed_filters_load_without_compiling_and_answer_alike(compiled, compiles):
    specs = _specs(200)
    loaded = RTreeMatchingEngine(schema_element(D))
    loaded.add_packed_filters(_forms(compiled, specs))
    assert compiles == []
    assert loaded.filter_ids() == compiled.filter_ids()  # insertion order kept
    for mine, theirs in zip(loaded.bounding_box("two"), compiled.bounding_box("two")):
        assert mine.tolist() == theirs.tolist()
    assert _answers(loaded) == _answers(compiled)
    assert any(_answers(compiled))  # the events meet some filters
    mine, theirs = loaded.summary(0.5), compiled.summary(0.5)
    assert sorted(map(tuple, np.hstack([mine.mins, mine.maxs]).tolist())) == \
        sorted(map(tuple, np.hstack([theirs.mins, theirs.maxs]).tolist()))


def test_a_form_from_another_schema_is_compiled_from_its_text(compiled, compiles):
    specs = _specs(200)
    other = RTreeMatchingEngine(schema_element(D, high=20.0))  # binds to another space
    other.add_packed_filters(_forms(compiled, specs))
    assert len(compiles) == len(specs)
    again = RTreeMatchingEngine(schema_element(D, high=20.0))
    again.add_filters(specs)
    assert _answers(other) == _answers(again)


@pytest.mark.parametrize("damage", [
    lambda form: form[:-1],                                     # truncated
    lambda form: b"X" + form[1:],                               # not a packed form
    lambda form: form[:-8] + np.float64(np.nan).tobytes(),      # not finite
    lambda form: form[:-8] + np.float64(-1.0).tobytes(),        # a max below its min
    lambda form: form[:len(prefix_for(Schema.from_config(schema_element(D))))] + b"\x00\x00",
    # one rectangle's length, but a count of 2
    lambda form: (form[:len(prefix_for(Schema.from_config(schema_element(D))))] + b"\x02\x00"
                  + form[len(prefix_for(Schema.from_config(schema_element(D)))) + 2:]),
    lambda form: form[:9] + bytes([form[9] ^ 1]) + form[10:],  # another schema's fingerprint
])
def test_a_damaged_form_is_compiled_from_its_text(compiled, compiles, damage):
    specs = _specs(200)
    forms = _forms(compiled, specs)
    forms[5] = (forms[5][0], forms[5][1], damage(forms[5][2]))
    loaded = RTreeMatchingEngine(schema_element(D))
    loaded.add_packed_filters(forms)
    assert compiles == [specs[5][1].expression]
    assert _answers(loaded) == _answers(compiled)


def test_only_exact_range_filters_have_a_packed_form():
    engine = RTreeMatchingEngine(schema_element(D))
    engine.add_filter("xpath", FilterSpec(XPATH10_DIALECT_2011, "/e:event[e:x0 > 3]",
                                          (("e", "urn:grid-events"),)))
    engine.add_filter("open", FilterSpec(RANGES_DIALECT, "x0 > 3"))  # open: checked always
    engine.add_filter("exact", FilterSpec(RANGES_DIALECT, "x0 in [1.0, 3.0]"))
    assert engine.packed_filter("xpath") is None
    assert engine.packed_filter("open") is None
    assert engine.packed_filter("exact") is not None
    assert engine.packed_filter("absent") is None


def test_a_form_given_for_a_filter_of_another_dialect_is_not_taken(compiled, compiles):
    form = compiled.packed_filter("f0")
    engine = RTreeMatchingEngine(schema_element(D))
    engine.add_packed_filters([("x", FilterSpec(XPATH10_DIALECT_2011, "/e:event[e:x0 > 3]",
                                                (("e", "urn:grid-events"),)), form)])
    assert len(compiles) == 1
    assert engine.match(event_element([1.0, 1.0, 1.0], 0)) == []


def test_ids_taken_or_repeated_are_refused_before_anything_is_stored(compiled):
    form = compiled.packed_filter("f0")
    spec = FilterSpec(RANGES_DIALECT, "x0 in [1.0, 3.0]")
    with pytest.raises(ValueError):
        compiled.add_packed_filters([("new", spec, form), ("f0", spec, form)])
    with pytest.raises(ValueError):
        compiled.add_packed_filters([("new", spec, form), ("new", spec, form)])
    assert "new" not in compiled


def test_forms_round_trip_one_and_several_rectangles():
    prefix = prefix_for(Schema.from_config(schema_element(2)))
    one = pack(prefix, np.array([[0.0, 1.0]]), np.array([[2.0, 3.0]]))
    two = pack(prefix, np.array([[0.0, 1.0], [4.0, 4.0]]), np.array([[2.0, 3.0], [5.0, 6.0]]))
    read = unpack(prefix, _packed([None, two, one, b"junk"]), 2)
    assert read.single.tolist() == [2]
    assert read.mins.tolist() == [[0.0, 1.0]] and read.maxs.tolist() == [[2.0, 3.0]]
    assert list(read.several) == [1]
    assert read.several[1][0].tolist() == [[0.0, 1.0], [4.0, 4.0]]
    assert read.several[1][1].tolist() == [[2.0, 3.0], [5.0, 6.0]]


def test_schemas_that_bind_differently_have_different_prefixes():
    assert prefix_for(Schema.from_config(schema_element(D))) == \
        prefix_for(Schema.from_config(schema_element(D)))
    assert prefix_for(Schema.from_config(schema_element(D))) != \
        prefix_for(Schema.from_config(schema_element(D, high=20.0)))


def test_forms_side_by_side_load_as_one_by_one(compiled, compiles):
    """add_packed_forms reads the buffer in numpy: in order (one topic's forms at a start)
    or gathered from a selection (several topics' forms interleaved), it loads what
    add_packed_filters loads, a form given for another dialect compiled from its text."""
    specs = _specs(200)
    items = _forms(compiled, specs)
    items[3] = (items[3][0], FilterSpec(XPATH10_DIALECT_2011, "/e"), items[3][2])
    by_items = RTreeMatchingEngine(schema_element(D))
    by_items.add_packed_filters(items)
    assert len(compiles) == 1
    interleaved = PackedForms()
    for _, _, form in items:
        interleaved.append(b"another topic's form")
        interleaved.append(form)
    for forms in (_packed(form for _, _, form in items),
                  interleaved.select(range(1, 2 * len(items), 2))):
        loaded = RTreeMatchingEngine(schema_element(D))
        loaded.add_packed_forms([i for i, _, _ in items], [spec for _, spec, _ in items], forms)
        assert loaded.filter_ids() == by_items.filter_ids()
        assert _answers(loaded) == _answers(by_items)
        assert loaded.packed_filter("f0") == items[0][2]
    assert len(compiles) == 3  # the XPath filter alone, each time


def test_packed_forms_read_back_as_appended():
    forms = [b"abc", None, b"", b"defg", b"hij"]
    packed = _packed(forms)
    assert list(packed) == forms and packed[1:4] == forms[1:4] and len(packed) == 5
    chosen = packed.select([4, 0, 4])
    assert list(chosen) == [b"hij", b"abc", b"hij"]
    assert list(packed.select(iter([1, 0]))) == [None, b"abc"]
    assert _rows(chosen, np.array([0, 1, 2]), 3).tobytes() == b"hijabchij"
    assert _rows(packed, np.array([0, 4]), 3).tobytes() == b"abchij"
    assert _rows(packed.select([]), np.zeros(0, dtype=np.int64), 3).shape == (0, 3)


def test_unpack_reads_only_the_positions_wanted():
    prefix = prefix_for(Schema.from_config(schema_element(2)))
    one = pack(prefix, np.array([[0.0, 1.0]]), np.array([[2.0, 3.0]]))
    two = pack(prefix, np.array([[0.0, 1.0], [4.0, 4.0]]), np.array([[2.0, 3.0], [5.0, 6.0]]))
    read = unpack(prefix, _packed([one, two, one, two]), 2, np.array([False, False, True, True]))
    assert read.single.tolist() == [2] and list(read.several) == [3]


def test_add_packed_forms_needs_as_many_ids_specs_and_forms(compiled):
    with pytest.raises(ValueError):
        compiled.add_packed_forms(["a", "b"], [FilterSpec(RANGES_DIALECT, "x0 > 1")],
                                  _packed([None, None]))


def test_a_matcher_without_forms_of_its_own_gets_them_one_by_one():
    class Recording(Matcher):
        uri = "urn:test:recording"

        def __init__(self):
            super().__init__()
            self.got = []

        def add_packed_filters(self, items):
            self.got.extend(items)

        def add_filter(self, filter_id, spec):
            raise AssertionError

        def remove_filter(self, filter_id):
            raise AssertionError

        def match(self, event, *, variables=None):
            return []

        def filter_ids(self):
            return [filter_id for filter_id, _, _ in self.got]

    spec = FilterSpec(RANGES_DIALECT, "x0 > 1")
    matcher = Recording()
    matcher.add_packed_forms(["a", "b"], [spec, spec], _packed([b"1", None]))
    assert matcher.got == [("a", spec, b"1"), ("b", spec, None)]
    with pytest.raises(ValueError):
        matcher.add_packed_forms(["c", "d"], [spec, spec], _packed([b"1"]))
    assert len(matcher.got) == 2
