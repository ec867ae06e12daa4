"""Each filter installed at a start gets its own stored form, whatever the rows around it:
rows without a filter or a form, filters refused before or by the matcher (whose batch is
then halved), rows of topics gone or of several topics interleaved. In process, with a
matcher that records what it was given."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from subscription_manager.view import SubscriptionView
from wsframework.matching import FilterSpec, InvalidFilter, UnsupportedDialect
from wsframework.matching.packed_forms import PackedForms
from wsframework.namespace import UnknownEntry


class RecordingMatcher:
    """Keeps id -> the form it was handed; refuses a whole batch holding a refused id."""

    def __init__(self, refuse=()):
        self.refuse, self.held, self.batches = set(refuse), {}, 0

    def check_dialect(self, spec):
        if spec.dialect == "urn:unsupported":
            raise UnsupportedDialect(spec.dialect, ["urn:d"])

    def add_packed_filters(self, items):
        self.batches += 1
        items = list(items)
        if any(filter_id in self.refuse for filter_id, _, _ in items):
            raise InvalidFilter("refused")
        self.held.update((filter_id, packed) for filter_id, _, packed in items)

    def add_packed_forms(self, ids, specs, forms):
        assert len(ids) == len(specs) == len(forms)
        self.add_packed_filters(zip(ids, specs, forms))

    def add_filter(self, filter_id, spec):
        self.held[filter_id] = "compiled"

    def __contains__(self, filter_id):
        return filter_id in self.held

    def __len__(self):
        return len(self.held)


class Topics:
    def __init__(self, entries):
        self.entries = entries

    def get(self, name):
        if name not in self.entries:
            raise UnknownEntry(name)
        return self.entries[name]


def _form(i: int) -> bytes:
    return f"form{i}".encode()


def _view(topics, matchers) -> SubscriptionView:
    view = SubscriptionView(store=None, topics=topics, matcher_for=lambda e: matchers[e.uid],
                            on_added=lambda *a, **k: None, on_removed=lambda *a, **k: None)
    view._keep_own_template = lambda subscription: None
    return view


def _misaligned(matcher: RecordingMatcher) -> dict:
    return {i: form for i, form in matcher.held.items()
            if form is not None and form != _form(int(i[1:]))}


@pytest.mark.parametrize("packed", [True, False], ids=["packed forms", "a list of forms"])
def test_install_many_hands_each_filter_its_own_form(packed):
    entry = SimpleNamespace(uid="u1", name="t")
    matcher = RecordingMatcher(refuse={"s7", "s12"})
    view = _view(None, {"u1": matcher})
    subscriptions, forms = [], PackedForms() if packed else []
    for i in range(20):
        spec = (None if i % 5 == 0 else FilterSpec("urn:unsupported", "x") if i == 9
                else FilterSpec("urn:d", f"e{i}"))
        subscriptions.append(SimpleNamespace(id=f"s{i}", topic_uid="u1", filter=spec,
                                             version=None))
        forms.append(None if i % 4 == 0 else _form(i))
    refused = view.install_many(entry, subscriptions, forms)
    assert sorted(refused) == ["s12", "s7", "s9"]
    assert matcher.batches > 1  # the refusals halved the batch
    assert _misaligned(matcher) == {}
    filtered = {f"s{i}" for i in range(20) if i % 5} - {"s7", "s9", "s12"}
    assert set(matcher.held) == filtered
    assert all(matcher.held[i] == (None if int(i[1:]) % 4 == 0 else _form(int(i[1:])))
               for i in filtered)


def test_a_start_gives_each_topic_its_rows_forms_among_rows_it_skips():
    entries = {"a": SimpleNamespace(uid="ua", name="a"), "b": SimpleNamespace(uid="ub", name="b")}
    matchers = {"ua": RecordingMatcher(), "ub": RecordingMatcher(refuse={"s13"})}
    view = _view(Topics(entries), matchers)
    active, forms = [], PackedForms()
    for i in range(30):
        topic = "abc"[i % 3]  # topic c is gone; row 4 names a stale uid of topic b
        uid = "stale" if i == 4 else {"a": "ua", "b": "ub", "c": "uc"}[topic]
        spec = None if i % 7 == 0 else FilterSpec("urn:d", f"e{i}")
        active.append(SimpleNamespace(id=f"s{i}", topic=topic, topic_uid=uid, filter=spec,
                                      version=None))
        forms.append(None if i % 4 == 0 else _form(i))
    view._load_into_empty(active, forms)
    for uid, matcher in matchers.items():
        assert _misaligned(matcher) == {}
    assert set(matchers["ua"].held) == {f"s{i}" for i in range(0, 30, 3) if i % 7}
    assert set(matchers["ub"].held) == {f"s{i}" for i in range(1, 30, 3)
                                        if i % 7 and i not in (4, 13)}
    assert len(view.subscriptions) == 30
