"""A Subscribe retried at another server (subscription_manager.server.placement_claims): the
owner of the request's placement key settles where it is made, so the retry gets the
subscription the first copy made, whichever servers the client tried and whatever their
routers would choose. Rendezvous ranking, the claim's bounds, and what happens when the
owner is unreachable or refuses. In process, no socket."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
import requests
from lxml import etree

from matchers.ranges import RANGES_DIALECT
from route_manager import protocol
from route_manager.workloads.grid_xml import range_filter
from subscription_manager.client import EventingClient, SubscriptionHandle, subscribe_body
from subscription_manager.lifecycle import State
from subscription_manager.operations import MAX_MESSAGE_ID
from subscription_manager.server.placement_claims import rank_owners
from subscription_manager.server.relay import MessageIdClient
from subscription_manager.versions import VERSIONS
from tests.support.edn import Network, server_url
from tests.support.eventing import SINK, TOKEN
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.transport import TransportError

BOX = (np.zeros(3), np.ones(3))


def subscribe(net: Network, at: int, message_id: str, *, sink: str = "/n/0",
              version: str = "2011") -> SubscriptionHandle:
    """A Subscribe under ``message_id`` sent to server ``at``: the handle it is answered with."""
    client = EventingClient(version, transport=net.transport)
    client.soap = MessageIdClient(net.transport, message_id, wsa_version=VERSIONS[version].wsa)
    body = subscribe_body(version, SINK + sink, filter=range_filter(*BOX),
                          dialect=RANGES_DIALECT, expires="PT1H")
    return client.subscribe_raw(f"{server_url(at)}/topics/grid", body)


def same_subscription(a: SubscriptionHandle, b: SubscriptionHandle) -> bool:
    return (a.manager.address, a.id) == (b.manager.address, b.id)


def active(net: Network) -> int:
    return sum(m.store.count(State.ACTIVE) for m in net.managers)


def keep_where_it_arrives(net: Network) -> None:
    """Each server's router keeps every Subscribe where it arrived: without a settled
    placement, a retry at another server would be made there too."""
    for k, manager in enumerate(net.managers):
        manager.router.choose = lambda *args, _name=f"s{k}", **kwargs: _name


def counter(net: Network, at: int, name: str) -> int:
    return int(net.manager(at).edn_counters.get(name, 0))


@pytest.fixture
def net(tmp_path):
    network = Network(tmp_path, partitioners=("rtree", "rtree", "rtree"))
    network.create_topic()
    network.step(2)
    yield network
    network.close()


# == a retry at another server =================================================================

MESSAGE_IDS = [f"urn:uuid:retry-{k}" for k in range(8)]


def test_a_retry_at_another_server_gets_the_subscription_the_first_made(net):
    keep_where_it_arrives(net)
    for message_id in MESSAGE_IDS:
        first = subscribe(net, 0, message_id)
        again = subscribe(net, 1, message_id)
        assert same_subscription(first, again), message_id
        assert first.manager.address.startswith(server_url(0))
    assert active(net) == len(MESSAGE_IDS)
    # the keys are owned across the servers: claims were answered by more than one of them
    answered = [counter(net, k, "placement_claims_answered") for k in range(3)]
    assert sum(1 for n in answered if n) >= 2, answered


def test_every_server_sends_a_retry_to_the_one_subscription(net):
    keep_where_it_arrives(net)
    first = subscribe(net, 2, "urn:uuid:everywhere")
    for at in (0, 1, 2, 1, 0):
        assert same_subscription(subscribe(net, at, "urn:uuid:everywhere"), first)
    assert active(net) == 1 and net.manager(2).store.count(State.ACTIVE) == 1


def test_routers_that_choose_different_peers_still_agree(net):
    net.manager(0).router.choose = lambda *args, **kwargs: "s1"
    net.manager(2).router.choose = lambda *args, **kwargs: "s2"
    first = subscribe(net, 0, "urn:uuid:disagree")
    again = subscribe(net, 2, "urn:uuid:disagree")
    assert same_subscription(first, again)
    assert active(net) == 1 and net.manager(1).store.count(State.ACTIVE) == 1


def test_other_requests_are_still_placed_where_the_router_says(net):
    keep_where_it_arrives(net)
    a = subscribe(net, 0, "urn:uuid:one")
    b = subscribe(net, 1, "urn:uuid:two")
    c = subscribe(net, 1, "urn:uuid:one", sink="/n/other")  # another client reusing the id
    assert a.manager.address.startswith(server_url(0))
    assert b.manager.address.startswith(server_url(1))
    assert c.manager.address.startswith(server_url(1)) and not same_subscription(a, c)
    assert active(net) == 3


def test_a_subscribe_whose_message_id_is_not_remembered_claims_nothing(net):
    keep_where_it_arrives(net)
    too_long = "urn:x:" + "a" * MAX_MESSAGE_ID
    for at in (0, 1, 2):
        subscribe(net, at, too_long)
    assert active(net) == 3
    assert all(counter(net, k, "placement_claims_answered") == 0 for k in range(3))


# == the owner unreachable, refusing, or naming a server unknown here ===========================

class FailsFor:
    """Peer posts to the admin address of ``server``: refused before anything is sent
    (``read_timeout`` False) or timed out reading the answer; others pass."""

    def __init__(self, inner, server: int, *, read_timeout: bool = False):
        self.inner = inner
        self.admin = server_url(server) + "/admin"
        self.read_timeout = read_timeout
        self.failed = 0

    def post(self, url, payload, content_type, soap_action):
        if url != self.admin:
            return self.inner.post(url, payload, content_type, soap_action)
        self.failed += 1
        cause = (requests.exceptions.ReadTimeout("read timed out") if self.read_timeout
                 else requests.exceptions.ConnectionError("connection refused"))
        try:
            raise cause
        except requests.exceptions.RequestException as exc:
            raise TransportError(str(exc)) from exc


def test_an_unreachable_owner_is_marked_down_and_the_next_one_settles(net):
    keep_where_it_arrives(net)
    first = net.manager(0)
    first.placement.claims.owners = lambda key: ["s1", "s2", "s0"]
    first.peer_transport = FailsFor(net.transport, 1)
    handle = subscribe(net, 0, "urn:uuid:down")
    assert first.peer_transport.failed == 1
    assert first.is_down("s1")
    assert counter(net, 2, "placement_claims_answered") == 1  # s2 settled it: s0 stands
    assert handle.manager.address.startswith(server_url(0)) and active(net) == 1


def test_an_owner_that_does_not_answer_in_time_is_a_fault_naming_it(tmp_path):
    network = Network(tmp_path, partitioners=("rtree", "rtree"),
                      settings={"forward_timeout": "0.2"})
    try:
        network.create_topic()
        network.step(2)
        keep_where_it_arrives(network)
        first = network.manager(0)
        first.placement.claims.owners = lambda key: ["s1", "s0"]
        first.peer_transport = FailsFor(network.transport, 1, read_timeout=True)
        with pytest.raises(SoapFault) as info:
            subscribe(network, 0, "urn:uuid:slow")
        assert "placement owner s1 did not answer in time" in info.value.reason
        assert first.peer_transport.failed >= 2  # a claim is sent again within the timeout
        assert active(network) == 0 and not first.is_down("s1")
    finally:
        network.close()


def test_an_owner_that_refuses_the_claim_leaves_the_choice_here(net):
    keep_where_it_arrives(net)
    first = net.manager(0)
    first.placement.claims.owners = lambda key: ["s1", "s0"]
    net.manager(1).server_admin.claim = _refuse
    handle = subscribe(net, 0, "urn:uuid:refused")
    assert handle.manager.address.startswith(server_url(0)) and active(net) == 1
    assert counter(net, 0, "placement_claim_faults") == 1
    # remembered here: a retry here gets it without asking again
    assert same_subscription(subscribe(net, 0, "urn:uuid:refused"), handle)
    assert counter(net, 0, "placement_claim_faults") == 1 and active(net) == 1


def _refuse(key, target):
    from subscription_manager.server.exceptions import UnusableClaim
    raise UnusableClaim("refused by the test")


def test_an_owner_naming_a_server_unknown_here_is_a_fault(net):
    keep_where_it_arrives(net)
    net.manager(0).placement.claims.owners = lambda key: ["s1", "s0"]
    net.manager(1).server_admin.claim = lambda key, target: "s9"
    with pytest.raises(SoapFault) as info:
        subscribe(net, 0, "urn:uuid:unknown")
    assert "'s9'" in info.value.reason and active(net) == 0


# == ClaimPlacement: first claim wins, hostile claims refused ==================================

KEY = hashlib.sha256(b"a request").hexdigest()


def claim(net: Network, at: int, key: str, target: str, token: str = TOKEN) -> str:
    admin = AdminClient(server_url(at), token, transport=net.transport)
    return admin.call(protocol.ClaimPlacement(Key=key, Target=target)).Target


def test_the_first_claim_stands(net):
    assert claim(net, 1, KEY, "s2") == "s2"
    assert claim(net, 1, KEY, "s0") == "s2"
    assert claim(net, 1, hashlib.sha256(b"another").hexdigest(), "s0") == "s0"


@pytest.mark.parametrize("key, target", [
    ("short", "s1"),
    (KEY.upper(), "s1"),
    (KEY + "0", "s1"),
    ("x" * 100_000, "s1"),
    (KEY, "s" * (protocol.MAX_SERVER_NAME + 1)),
    (KEY, "s 1"),
    (KEY, "s1\n"),
])
def test_a_claim_no_server_makes_is_an_invalid_request(net, key, target):
    with pytest.raises(SoapFault) as info:
        claim(net, 1, key, target)
    assert info.value.code.endswith("Sender")
    assert contracts.FAULT_INVALID_REQUEST in [str(etree.QName(s)) for s in info.value.subcodes]
    assert net.manager(1).service.store.query("SELECT COUNT(*) FROM edn_placements")[0][0] == 0


def test_a_claim_without_the_credential_is_refused(net):
    with pytest.raises(SoapFault) as info:
        claim(net, 1, KEY, "s1", token="not-the-token")
    assert contracts.FAULT_ACCESS_DENIED in [str(etree.QName(s)) for s in info.value.subcodes]
    assert net.manager(1).service.store.query("SELECT COUNT(*) FROM edn_placements")[0][0] == 0


# == rendezvous ranking ========================================================================

def test_the_ranking_is_the_same_whatever_order_the_names_come_in():
    names = [f"s{k}" for k in range(7)]
    for k in range(50):
        key = hashlib.sha256(str(k).encode()).hexdigest()
        ranked = rank_owners(key, names)
        assert sorted(ranked) == names
        assert rank_owners(key, list(reversed(names)) + names[:2]) == ranked


def test_a_server_added_takes_over_only_the_keys_it_ranks_first():
    names = [f"s{k}" for k in range(4)]
    keys = [hashlib.sha256(str(k).encode()).hexdigest() for k in range(4000)]
    before = {key: rank_owners(key, names)[0] for key in keys}
    after = {key: rank_owners(key, [*names, "s4"])[0] for key in keys}
    moved = [key for key in keys if before[key] != after[key]]
    assert all(after[key] == "s4" for key in moved)
    assert 0.15 < len(moved) / len(keys) < 0.25  # about 1/5 of them
    # a server removed: its keys go to their next server, the others stay
    without = {key: rank_owners(key, names[1:])[0] for key in keys}
    assert all(without[k] == before[k] for k in keys if before[k] != "s0")
    assert all(without[k] == rank_owners(k, names)[1] for k in keys if before[k] == "s0")
