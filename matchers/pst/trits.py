"""Link matching (section 3 of Gryphon's link-matching paper, Banavar et al., ICDCS 1999): a
broker's parallel search tree annotated with one trit vector per node, one trit per link
(Y: a search reaching the node is guaranteed to match a subscriber behind that link; N: no
subsearch leads to one; M: maybe), and the search that refines an initialization mask into
the links an event must go out on::

    links = LinkMatcher(["a1", "a2"], links=["l0", "l1", "l2"])
    links.add("s1", {"a1": 1}, "l1")
    sent, steps = links.link_match({"a1": 1, "a2": 5}, "MMN")   # -> ({"l1"}, steps)

Annotation (section 3.1): a leaf has Y on the links of its subscribers and N elsewhere. A
node combines its value children with **Alternative** combine, together with an implicit
all-N child standing for the values no branch has, and then the result with its ``*`` child
with **Parallel** combine (Table 1). The text says Alternative combine applies to "all
children of the node including the one reached through a *-branch"; the worked example
combines only the non-* children (Alt(MYY, NYN) = MYM) and then Parallel-combines the *
child (Par(MYM, YYN) = YYM). This follows the example, which is what the operators mean: the
* child is searched *as well as* the value child, not instead of it.

Matching (section 3.3): the mask starts as the initialization mask of the publisher's
spanning tree (M on links leading away from the publisher, N elsewhere); at each node every M
takes the node's trit; when no M is left the search stops; otherwise each child is searched
with a copy, a Y found below turns the M into Y, and the M still left after every child are N.

The tree's section 2.1 options (factoring, delayed branching) annotate as the structure
searches: an :class:`~.search_tree.Index` and a :class:`~.search_tree.Delayed` node lead to
exactly one of their entries, so they Alternative-combine them (an all-N one standing for a
missing combination or an empty ``other``); the nodes of one entry of a Delayed node are all
searched, so they are Parallel-combined first.

Inside, a trit vector is two bit sets (the links at Y, the links at N; M is neither), so the
combines are bitwise: Alternative is Y where both are Y and N where both are N; Parallel is Y
where either is Y and N where both are N. :meth:`LinkMatcher.annotate` still answers strings.
"""
from __future__ import annotations

from typing import Hashable, Mapping, Sequence

from .search_tree import Delayed, Index, Node, ParallelSearchTree, children, successors

__all__ = ["Y", "N", "M", "alternative", "parallel", "LinkMatcher", "initialization_mask"]

Y, N, M = "Y", "N", "M"


def alternative(a: str, b: str) -> str:
    """Table 1, Alternative combine: Y only if both Y, N only if both N, else M."""
    return a if a == b and a != M else M


def parallel(a: str, b: str) -> str:
    """Table 1, Parallel combine: Y if either is Y, else M if either is M, else N."""
    if Y in (a, b):
        return Y
    return M if M in (a, b) else N


def combine(vectors, operator) -> str:
    vectors = list(vectors)
    out = list(vectors[0])
    for vector in vectors[1:]:
        out = [operator(x, y) for x, y in zip(out, vector)]
    return "".join(out)


def initialization_mask(links: Sequence[str], downstream: set[str]) -> str:
    """M on the links leading away from the publisher (``downstream``), N on the others."""
    return "".join(M if link in downstream else N for link in links)


class LinkMatcher:
    def __init__(self, attributes: Sequence[str], links: Sequence[str], *,
                 order: Sequence[str] | None = None, factoring: Sequence[str] | int = (),
                 delayed_branching: int | bool = 0):
        """``order``, ``factoring``, ``delayed_branching``: the tree's
        (:class:`~.search_tree.ParallelSearchTree`)."""
        self.tree = ParallelSearchTree(attributes, order=order, factoring=factoring,
                                       delayed_branching=delayed_branching)
        self._set_links(links)
        self.link_of: dict[Hashable, str] = {}

    @classmethod
    def over(cls, tree: ParallelSearchTree, links: Sequence[str],
             link_of: Mapping[Hashable, str]) -> "LinkMatcher":
        """A matcher sharing ``tree`` (its subscriptions, prepared once) with other matchers:
        one broker's links and the link of each of the tree's subscriptions. A change made
        through any of them changes the shared tree, and each re-annotates on its next match
        (it needs a link for every subscription then)."""
        matcher = cls.__new__(cls)
        matcher.tree = tree
        matcher._set_links(links)
        missing = set(tree.subscriptions) - set(link_of)
        if missing:
            raise ValueError(f"no link for {len(missing)} subscriptions of the tree")
        unknown = set(link_of.values()) - set(matcher._position)
        if unknown:
            raise ValueError(f"unknown links {sorted(unknown)}")
        matcher.link_of = dict(link_of)
        return matcher

    def _set_links(self, links: Sequence[str]) -> None:
        self.links = tuple(links)
        self._position = {link: k for k, link in enumerate(self.links)}
        if len(self._position) != len(self.links):
            raise ValueError("links must be distinct")
        self._all = (1 << len(self.links)) - 1
        self._trits: dict | None = None       # id(node) -> (Y bits, N bits)
        self._annotated_root = None

    def add(self, sub_id: Hashable, tests: Mapping[str, Hashable], link: str) -> None:
        if link not in self._position:
            raise ValueError(f"unknown link {link!r}")
        self.tree.add(sub_id, tests)
        self.link_of[sub_id] = link

    def remove(self, sub_id: Hashable) -> None:
        self.tree.remove(sub_id)
        del self.link_of[sub_id]

    # -- annotation (section 3.1) -------------------------------------------------------------
    def annotate(self) -> dict[int, str]:
        """Node id -> trit vector, bottom up (done by the first match after a change)."""
        return {node: self._text(*bits) for node, bits in self._annotated().items()}

    def _annotated(self) -> dict:
        root = self.tree.prepare()
        if self._trits is None or self._annotated_root is not root:
            self._trits = {}
            self._annotate(root)
            self._annotated_root = root
        return self._trits

    def _text(self, yes: int, no: int) -> str:
        return "".join(Y if yes >> k & 1 else N if no >> k & 1 else M
                       for k in range(len(self.links)))

    def _annotate(self, node) -> tuple[int, int]:
        done = self._trits.get(id(node))   # a DAG (delayed branching) shares nodes
        if done is not None:
            return done
        if type(node) is Node and node.attribute is None:
            yes = 0
            for sub_id in node.ids:
                yes |= 1 << self._position[self.link_of[sub_id]]
            bits = (yes, self._all & ~yes)
        elif type(node) is Node:
            # the value children and the implicit all-N child of the values without a branch
            bits = self._alternative([self._annotate(child) for child in node.branches.values()],
                                     missing=True)
            if node.star is not None:
                bits = self._parallel([bits, self._annotate(node.star)])
        elif type(node) is Delayed:
            groups = [*node.branches.values(), node.other]
            bits = self._alternative([self._parallel([self._annotate(n) for n in group])
                                      for group in groups], missing=False)
        else:
            assert type(node) is Index
            bits = self._alternative([self._annotate(child) for child in children(node)],
                                     missing=not node.complete)
        self._trits[id(node)] = bits
        return bits

    def _alternative(self, vectors: list, *, missing: bool) -> tuple[int, int]:
        """Table 1's Alternative combine; ``missing``: with an all-N alternative too."""
        yes, no = self._all, self._all
        if missing:
            yes = 0
        for y, n in vectors:
            yes &= y
            no &= n
        return yes, no

    def _parallel(self, vectors: list) -> tuple[int, int]:
        """Table 1's Parallel combine (an empty list: all N)."""
        yes, no = 0, self._all
        for y, n in vectors:
            yes |= y
            no &= n
        return yes, no

    # -- matching (section 3.3) ---------------------------------------------------------------
    def link_match(self, event: Mapping[str, Hashable], mask: str | None = None
                   ) -> tuple[set[str], int]:
        """The links the event goes out on (the Y of the refined mask) and the steps."""
        if mask is None:
            mask = M * len(self.links)
        if len(mask) != len(self.links) or set(mask) - {Y, N, M}:
            raise ValueError("the mask needs one trit (Y, N or M) per link")
        if not self.tree.subscriptions:
            return set(), 0
        trits = self._annotated()
        yes = sum(1 << k for k, trit in enumerate(mask) if trit == Y)
        maybe = sum(1 << k for k, trit in enumerate(mask) if trit == M)
        steps = [0]
        yes = self._search(self.tree.prepare(), yes, maybe, event, trits, steps)
        return {link for k, link in enumerate(self.links) if yes >> k & 1}, steps[0]

    def _search(self, node, yes: int, maybe: int, event, trits, steps) -> int:
        """The refined mask's Y bits (an M left after every child is an N: not returned)."""
        steps[0] += 1
        node_yes, node_no = trits[id(node)]
        yes |= maybe & node_yes
        maybe &= ~(node_yes | node_no)
        if maybe:
            for child in successors(node, event):
                found = self._search(child, yes, maybe, event, trits, steps)
                yes |= maybe & found
                maybe &= ~found
                if not maybe:
                    break
        return yes
