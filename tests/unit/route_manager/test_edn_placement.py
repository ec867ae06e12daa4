"""Online subscription placement (route_manager.placement_router) and peer state
(route_manager.peers), on constructed cases."""
from __future__ import annotations

import numpy as np
import pytest
from lxml import etree

from matchers import FilterSpec
from wsframework.matching.errors import InvalidFilter
from matchers.ranges import RANGES_DIALECT
from matchers.schema import Schema
from matchers.summary import Summary
from route_manager.peers import PeerSummary, PeerTable
from route_manager.placement_router import Candidate, PlacementRouter, Space, subscription_box
from tests.support.edn import EV, schema_element
from wsframework.store import Store

SCHEMA = Schema.from_element(schema_element(2))
SPACE = Space.of(SCHEMA)


def box(lo, hi):
    return np.array([lo], dtype=float), np.array([hi], dtype=float)


def cand(name, load=0, boxes=None, centroid=None, count=0):
    mins, maxs = boxes if boxes is not None else (np.empty((0, 2)), np.empty((0, 2)))
    return Candidate(name, load, mins, maxs,
                     None if centroid is None else np.asarray(centroid, dtype=float), count)


class View:
    """A RouteView over fixed candidates (the first one is this server)."""

    def __init__(self, candidates, *, self_load=None, content=0):
        self.set(candidates, self_load=self_load, content=content)
        self.space = SPACE
        self.builds = 0

    def set(self, candidates, *, self_load=None, content=0):
        self._candidates = list(candidates)
        self.self_name = self._candidates[0].name
        self._self_load = self._candidates[0].load if self_load is None else self_load
        self._content = content

    @property
    def self_load(self):
        return self._self_load

    def membership(self):
        return tuple(c.name for c in self._candidates)

    def content_key(self):
        return self._content

    def candidates(self):
        self.builds += 1
        return self._candidates


# -- rtree ----------------------------------------------------------------------------------

def rtree_view(loads=(5, 5, 5)):
    return View([cand("a", loads[0], box([0, 0], [2, 2])),
                 cand("b", loads[1], box([4, 4], [8, 8])),
                 cand("c", loads[2], box([7, 7], [10, 10]))])


def test_rtree_picks_the_server_with_the_largest_overlap():
    router = PlacementRouter("rtree", load_threshold=100)
    assert router.choose("t", [5, 5], [7.5, 7.5], rtree_view()) == "b"
    assert router.choose("t", [8.5, 8.5], [9.5, 9.5], rtree_view()) == "c"
    assert router.choose("t", [0.5, 0.5], [1, 1], rtree_view()) == "a"


def test_rtree_respects_the_load_threshold():
    router = PlacementRouter("rtree", load_threshold=10)
    # b (the best overlap) is at the threshold: the next best overlap, c, wins.
    assert router.choose("t", [5, 5], [7.5, 7.5], rtree_view((5, 10, 5))) == "c"
    router = PlacementRouter("rtree", load_threshold=10)
    # b and c full: nobody else overlaps, so the least loaded eligible server (here a).
    assert router.choose("t", [5, 5], [7.5, 7.5], rtree_view((5, 10, 12))) == "a"


def test_rtree_zero_overlap_and_ties_go_to_the_least_loaded():
    router = PlacementRouter("rtree", load_threshold=100)
    assert router.choose("t", [2.5, 9], [3, 9.5], rtree_view((7, 3, 5))) == "b"
    # Both b and c contain [7.2, 7.8]^2 whole: a tie on the overlap volume.
    router = PlacementRouter("rtree", load_threshold=100)
    assert router.choose("t", [7.2, 7.2], [7.8, 7.8], rtree_view((5, 9, 4))) == "c"
    router = PlacementRouter("rtree", load_threshold=100)
    assert router.choose("t", [7.2, 7.2], [7.8, 7.8], rtree_view((5, 4, 9))) == "b"


def test_every_server_full_keeps_the_subscription_here():
    router = PlacementRouter("rtree", load_threshold=5)
    assert router.choose("t", [5, 5], [7.5, 7.5], rtree_view((6, 5, 9))) == "a"
    router = PlacementRouter("kmeans", load_threshold=5)
    assert router.choose("t", [5, 5], [6, 6], rtree_view((6, 5, 9))) == "a"


def test_placements_are_recorded_until_the_next_refresh():
    router = PlacementRouter("rtree", load_threshold=100, refresh_interval=3600)
    view = View([cand("a", 3), cand("b", 0), cand("c", 2)])
    # Nothing overlaps: the least loaded server (b) takes the first one, and its box is
    # recorded, so an identical second subscription follows it there.
    assert router.choose("t", [1, 1], [2, 2], view) == "b"
    assert router.choose("t", [1, 1], [2, 2], view) == "b"
    assert view.builds == 1
    # New content (a peer update) is taken only after refresh_interval ...
    view.set([cand("a", 3), cand("b", 0), cand("c", 2)], content=1)
    router.choose("t", [1, 1], [2, 2], view)
    assert view.builds == 1
    # ... but a new member is taken at once.
    view.set([cand("a", 3), cand("b", 0), cand("c", 2), cand("d", 0)], content=1)
    router.choose("t", [1, 1], [2, 2], view)
    assert view.builds == 2


def test_own_load_is_live():
    router = PlacementRouter("rtree", load_threshold=10, refresh_interval=3600)
    view = View([cand("a", 0, box([0, 0], [10, 10])), cand("b", 0, box([0, 0], [10, 10]))],
                self_load=0)
    assert router.choose("t", [1, 1], [2, 2], view) == "a"  # tie: least loaded, lowest index
    view._self_load = 10  # at the threshold now, without any rebuild
    assert router.choose("t", [1, 1], [2, 2], view) == "b"


# -- kmeans ---------------------------------------------------------------------------------

def kmeans_view(loads=(5, 5, 5)):
    return View([cand("a", loads[0], centroid=[1, 1], count=4),
                 cand("b", loads[1], centroid=[5, 5], count=4),
                 cand("c", loads[2], centroid=[9, 9], count=4)])


def test_kmeans_picks_the_nearest_centroid():
    router = PlacementRouter("kmeans", load_threshold=100)
    assert router.choose("t", [7.5, 7.5], [8.5, 8.5], kmeans_view()) == "c"
    router = PlacementRouter("kmeans", load_threshold=100)
    assert router.choose("t", [3, 3], [7, 6], kmeans_view()) == "b"


def test_kmeans_respects_the_threshold_and_seeds_empty_servers():
    router = PlacementRouter("kmeans", load_threshold=10)
    assert router.choose("t", [7.5, 7.5], [8.5, 8.5], kmeans_view((5, 5, 10))) == "b"
    router = PlacementRouter("kmeans", load_threshold=10)
    view = View([cand("a", 5, centroid=[1, 1], count=4), cand("b", 0),
                 cand("c", 5, centroid=[9, 9], count=4)])
    assert router.choose("t", [8.5, 8.5], [9, 9], view) == "b"  # no centroid yet: first
    # ... and the centroid it got is recorded: b is nearest for a neighbour now.
    assert router.choose("t", [8.4, 8.4], [8.9, 8.9], view) == "b"


# -- random and local -----------------------------------------------------------------------

def test_random_spreads_over_eligible_servers_only():
    router = PlacementRouter("random", load_threshold=1000, random_state=7)
    view = View([cand("a", 0), cand("b", 1000), cand("c", 0)])
    chosen = [router.choose("t", [1, 1], [2, 2], view) for _ in range(200)]
    assert set(chosen) == {"a", "c"}
    assert 60 < chosen.count("a") < 140


def test_local_never_forwards():
    router = PlacementRouter("local", load_threshold=1)
    assert router.choose("t", [5, 5], [7.5, 7.5], rtree_view((50, 0, 0))) == "a"


def test_alone_stays_here_and_bad_parameters_are_refused():
    assert PlacementRouter("rtree").choose("t", [0, 0], [1, 1], View([cand("a", 99)])) == "a"
    with pytest.raises(ValueError):
        PlacementRouter("hash")
    with pytest.raises(ValueError):
        PlacementRouter("rtree", load_threshold=0)


# -- rectangles and coordinates -------------------------------------------------------------

def test_subscription_box_is_the_hull_of_the_filter_rectangles():
    lo, hi = subscription_box(SCHEMA, FilterSpec(RANGES_DIALECT, "x0 in [1, 2] or x0 in [5, 6]"))
    assert lo[0] == 1 and hi[0] == 6
    assert lo[1] == SCHEMA.null[1] and hi[1] == 10  # unconstrained: NULL .. max
    everything = subscription_box(SCHEMA, None)
    assert np.array_equal(everything[0], SCHEMA.null) and np.array_equal(everything[1], [10, 10])
    xpath = FilterSpec("http://www.w3.org/2011/03/ws-evt/Dialects/XPath10", "e:x1 > 3",
                       (("e", EV),))
    lo, hi = subscription_box(SCHEMA, xpath)
    assert lo[1] == pytest.approx(3) and hi[1] == 10  # open bound: a hair of slack
    with pytest.raises(InvalidFilter):
        subscription_box(SCHEMA, FilterSpec(RANGES_DIALECT, "nope in [1"))


def test_space_maps_the_schema_onto_zero_to_ten():
    lo, hi = SPACE.normalize_box([-10, 0], [10, 5])
    assert np.allclose(lo, [0, 5]) and np.allclose(hi, [10, 7.5])
    empty = Space.of(Schema())
    assert empty.normalize_box(np.zeros(0), np.zeros(0))[1].tolist() == [10.0]


# -- peer summaries and the peer table ------------------------------------------------------

def test_peer_summary_round_trip_and_validation():
    summary = Summary(("x0", "x1"), np.array([[1.0, 2.0]]), np.array([[3.0, 4.5]]))
    element = PeerSummary(summary, np.array([2.0, 3.25]), 7).to_element()
    back = PeerSummary.from_element(etree.fromstring(etree.tostring(element)))
    assert back.summary == summary and back.count == 7
    assert back.centroid.tolist() == [2.0, 3.25]
    bare = PeerSummary.from_element(summary.to_element())
    assert bare.summary == summary and bare.centroid is None
    bad = etree.fromstring(etree.tostring(element))
    bad.find("{urn:wsframework:edn}Centroid").text = "1.0"
    with pytest.raises(InvalidFilter):
        PeerSummary.from_element(bad)
    with pytest.raises(InvalidFilter):
        PeerSummary.from_element(etree.Element("other"))


def test_peer_table_follows_membership_and_updates(tmp_path):
    store = Store(tmp_path / "edn.db")
    table = PeerTable(store)
    g0 = table.generation()
    assert table.set_servers([("me", "http://me", 1), ("b", "http://b/", 4),
                              ("c", "http://c", None)], exclude="me")
    assert table.servers() == {"b": ("http://b", 4), "c": ("http://c", 0)}
    assert not table.set_servers([("b", "http://b", 4), ("c", "http://c", None)])
    summary = Summary(("x0", "x1"), np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    table.update("b", "http://b", "t", 9, PeerSummary(summary, np.array([2.0, 3.0]), 9))
    states = {s.name: s for s in table.route_states("t")}
    assert states["b"].load == 9 and states["b"].dims == ("x0", "x1")
    assert states["b"].mins.tolist() == [[1.0, 2.0]] and states["b"].count == 9
    assert states["c"].mins.size == 0 and states["c"].centroid is None
    assert table.generation() > g0
    # A second process (another worker) sees the same state through the store.
    other = PeerTable(Store(tmp_path / "edn.db"))
    assert [s.name for s in other.route_states("t")] == ["b", "c"]
    table.set_servers([("c", "http://c", 2)])
    assert list(table.servers()) == ["c"]
    assert store.query("SELECT COUNT(*) FROM edn_peer_routes")[0][0] == 0
