"""The routing modes of a network (``edn serve dispatcher --routing MODE``; the same on every
node: :data:`route_manager.protocol.ROUTING_MODES`).

* ``summaries`` (default): every node reports a summary upward; each dispatcher routes with
  its route set (:class:`matchers.RTreeRouteSet`) at a self-tuned precision.
* ``linkmatching`` (Gryphon, section 3): every node reports the equality predicates of the
  subscriptions below it; each dispatcher's route is a
  :class:`~matchers.pst.links_route_set.LinkRouteSet` whose filters are its children's
  predicate reports and whose answer is the children on Y links (a tree: every child is
  downstream, the initialization mask is all-M). Precision has no meaning: fixed, no
  self-tuning.
* ``flooding``: every event goes to every node registered below, nothing is read (precision
  none, fixed, no self-tuning). Nodes still report summaries: loads, placement and status
  come from those updates; routing never reads them.

Negotiation: a dispatcher announces its mode in every RegisterServerResponse (``Routing``). A
subscription server adopts it; a child dispatcher, configured with its own ``--routing``,
refuses a parent whose mode differs: it logs an error, hosts none of that parent's topics and
reports nothing to any parent (:meth:`ModeCheck.agrees`), since a network with two modes
would route some events by reports that were never made for it.
"""
from __future__ import annotations

import dataclasses
import logging

from matchers import known_matchers, register_matcher
from matchers.pst.links_route_set import MATCHER_PST_LINKS, LinkRouteSet
from matchers.vocabulary import MATCHER_RTREE_ROUTE_SET
from wsframework.exceptions import SoapFault

from ..protocol import ROUTING_FLOODING, ROUTING_LINKMATCHING, ROUTING_SUMMARIES, routing_of
from ..precision import PRECISE

log = logging.getLogger(__name__)

__all__ = ["route_matcher_for", "settings_for_mode", "ModeCheck"]

def route_matcher_for(mode: str) -> str:
    """The matcher URI of a route created by a dispatcher routing in ``mode``; link
    matching's route set is registered then (no entry point of its own yet: it belongs to
    :mod:`matchers.pst`, whose package declares its plugins)."""
    if mode != ROUTING_LINKMATCHING:
        return MATCHER_RTREE_ROUTE_SET
    if MATCHER_PST_LINKS not in known_matchers():
        register_matcher(LinkRouteSet)
    return MATCHER_PST_LINKS


def settings_for_mode(settings):
    """``settings`` with the precision a mode implies: only summaries has one to tune."""
    if settings.routing == ROUTING_FLOODING:
        return dataclasses.replace(settings, self_tuning=False, initial_precision=0.0)
    if settings.routing == ROUTING_LINKMATCHING:
        return dataclasses.replace(settings, self_tuning=False, initial_precision=PRECISE)
    return settings


class ModeCheck:
    """A child dispatcher's check of its parents' modes against its own."""

    def __init__(self, mode: str = ROUTING_SUMMARIES):
        self.mode = mode
        self.refused: dict[str, str] = {}  # parent -> the mode it announced, when not ours

    def check(self, parent: str, response) -> bool:
        """True when ``parent``'s RegisterServerResponse announces our mode; otherwise the
        parent is remembered as refused and an error logged."""
        try:
            theirs = routing_of(response)
        except SoapFault as fault:
            theirs = f"unknown ({fault.reason})"
        if theirs == self.mode:
            self.refused.pop(parent, None)
            return True
        if self.refused.get(parent) != theirs:
            log.error("parent %s routes by %s, this dispatcher by %s: reporting nothing "
                      "(start every dispatcher of a network with the same --routing)",
                      parent, theirs, self.mode)
        self.refused[parent] = theirs
        return False

    def agrees(self) -> bool:
        return not self.refused
