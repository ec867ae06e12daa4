"""Gryphon's parallel search tree (sections 2 and 3 of Gryphon's link-matching paper: Banavar
et al., ICDCS 1999).

=====================  ======================================================================
module                 what lives there
=====================  ======================================================================
``search_tree``        :class:`ParallelSearchTree`: equality tests and don't-cares, matching
                       steps counted; section 2.1's factoring (an index) and delayed
                       branching (a DAG of windows) as options
``trits``              link matching: trit annotations (Table 1), mask refinement,
                       initialization masks (:class:`LinkMatcher`; ``LinkMatcher.over``
                       shares one prepared tree among brokers)
``plugin``             :class:`PSTMatcher`, the matcher ``urn:wsframework:matchers:pst``
``links_route_set``    a dispatcher's route in ``--routing linkmatching``
=====================  ======================================================================

::

    tree = ParallelSearchTree(["a1", "a2", "a3"], factoring=1, delayed_branching=True)
    links = LinkMatcher(["a1", "a2", "a3"], ["l0", "l1"], factoring=("a1",))
"""
from .search_tree import ParallelSearchTree
from .trits import LinkMatcher

__all__ = ["ParallelSearchTree", "LinkMatcher"]
