"""What a start reads from the subscriptions table: every active row once, in seq order
(the order of the changes, not of the rows' insertion), with each filter's stored compiled
form; on SQLite along the seq index, without sorting the rows afterwards. In process, no
socket."""
from __future__ import annotations

import dataclasses

import pytest

from subscription_manager.lifecycle import State
from subscription_manager.messages import UNWRAP
from subscription_manager.store import (
    _READ_AT_START,
    Subscription,
    SubscriptionStore,
)
from subscription_manager.versions import V2011
from wsframework.addressing import EndpointReference
from wsframework.matching.packed_forms import PackedForms
from wsframework.matching.base import FilterSpec
from wsframework.soap import SoapVersion
from wsframework.store import Store

T0 = 1_700_000_000.0


def _subscription(sid: str) -> Subscription:
    return Subscription(id=sid, topic="t", topic_uid="t-uid", version=V2011,
                        soap_version=SoapVersion.SOAP12.value,
                        filter=FilterSpec("urn:x", f"x in [0, {sid[1:]}]"),
                        notify_to=EndpointReference(f"http://a.test/{sid}"), end_to=None,
                        format=UNWRAP, expires=T0 + 3600, expires_kind="duration", created=T0)


def test_a_start_reads_the_active_rows_in_the_order_of_their_changes(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    for i in range(6):
        store.insert(_subscription(f"s{i}"))
    store.renew("s1", T0 + 7200, "duration", T0 + 10)  # s1 changes after the others
    store.unsubscribe("s3", T0 + 20)
    active, packed = store.active_packed()
    assert [s.id for s in active] == ["s0", "s2", "s4", "s5", "s1"]
    assert all(s.status is State.ACTIVE for s in active)
    assert [s.seq for s in active] == sorted(s.seq for s in active)
    assert active[-1].expires == T0 + 7200
    assert list(packed) == [None] * 5  # no compiled form was stored with these


@pytest.mark.sqlite_only("the plan is SQLite's")
def test_on_sqlite_the_start_reads_along_the_seq_index_and_sorts_nothing(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    plan = " ".join(str(step[-1]) for step in store.store.query(
        f"EXPLAIN QUERY PLAN {_READ_AT_START}", ("active",)))
    assert "eventing_subscriptions_seq" in plan and "TEMP B-TREE" not in plan


def test_rows_read_together_are_what_the_class_itself_would_build(tmp_path):
    """A chunk of rows is built a column at a time: each row's own values, Nones among
    values, and frozen objects the dataclass would make."""
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    plain = dataclasses.replace(_subscription("s1"), filter=None)
    varied = [plain,
              dataclasses.replace(_subscription("s2"), end_to=EndpointReference("http://b.test/e"),
                                  owner="alice", expires=None, expires_kind="infinite",
                                  filter=FilterSpec("urn:x", "q:p > 1", (("q", "urn:q"),))),
              dataclasses.replace(_subscription("s3"), topic="u", topic_uid="u-uid",
                                  notify_to=EndpointReference("http://c.test/n?a=1&b=<2>")),
              dataclasses.replace(plain, id="s4", filter=FilterSpec("urn:y", "", ()))]
    stored = [store.insert(s) for s in varied]
    read, _ = store.active_packed()
    assert read == stored
    assert [type(s) for s in read] == [Subscription] * 4
    assert [s.filter for s in read] == [None, varied[1].filter, varied[2].filter, varied[3].filter]
    assert not hasattr(Subscription, "__post_init__")  # building slot by slot skips nothing
    with pytest.raises(dataclasses.FrozenInstanceError):
        read[0].id = "other"
    assert store.changed_since(stored[1].seq) == stored[2:]


def test_every_field_survives_the_store(tmp_path):
    store = SubscriptionStore(Store(tmp_path / "s.db"))
    made = dataclasses.replace(
        _subscription("s8"), end_to=EndpointReference("http://b.test/end"), owner="alice",
        filter=FilterSpec("urn:x", "q:p > 1", (("q", "urn:q"),)), expires=None,
        expires_kind="infinite")
    stored = store.insert(made)
    (read,), _ = store.active_packed()
    assert read == stored and read.owner == "alice" and read.end_to == made.end_to
    assert read.filter == made.filter and read.expires is None


def test_the_forms_a_start_read_are_kept_in_order_without_an_object_apiece():
    forms = PackedForms()
    for form in (b"ab", None, memoryview(b"cde"), b"", None, b"f"):
        forms.append(form)
    assert len(forms) == 6
    assert list(forms) == [b"ab", None, b"cde", b"", None, b"f"]
    assert all(type(form) is bytes for form in forms if form is not None)
    assert list(forms.select([5, 0, 1, 2])) == [b"f", b"ab", None, b"cde"]
    assert list(forms.select([])) == []
    assert forms[1:4] == [None, b"cde", b""] and forms[-1] == b"f"
    with pytest.raises(IndexError):
        forms[6]
