"""Gryphon's parallel search tree (gryphon-link-matching.txt sections 2 and 3).

=====================  ======================================================================
module                 what lives there
=====================  ======================================================================
``search_tree``        :class:`ParallelSearchTree`: equality tests and don't-cares, matching
                       steps counted
``trits``              link matching: trit annotations (Table 1), mask refinement,
                       initialization masks (:class:`LinkMatcher`)
``plugin``             :class:`PSTMatcher`, the matcher ``urn:wsframework:matchers:pst``
``links_route_set``    a dispatcher's route in ``--routing linkmatching``
=====================  ======================================================================
"""
from .search_tree import ParallelSearchTree
from .trits import LinkMatcher

__all__ = ["ParallelSearchTree", "LinkMatcher"]
