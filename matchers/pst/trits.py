"""Link matching (gryphon-link-matching.txt section 3): a broker's parallel search tree
annotated with one trit vector per node, one trit per link (Y: a search reaching the node is
guaranteed to match a subscriber behind that link; N: no subsearch leads to one; M: maybe),
and the search that refines an initialization mask into the links an event must go out on::

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
"""
from __future__ import annotations

from typing import Hashable, Mapping, Sequence

from .search_tree import STAR, Node, ParallelSearchTree

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
                 order: Sequence[str] | None = None):
        self.tree = ParallelSearchTree(attributes, order=order)
        self.links = tuple(links)
        self._position = {link: k for k, link in enumerate(self.links)}
        self.link_of: dict[Hashable, str] = {}
        self._annotations: dict[int, str] | None = None

    def add(self, sub_id: Hashable, tests: Mapping[str, Hashable], link: str) -> None:
        if link not in self._position:
            raise ValueError(f"unknown link {link!r}")
        self.tree.add(sub_id, tests)
        self.link_of[sub_id] = link
        self._annotations = None

    def remove(self, sub_id: Hashable) -> None:
        self.tree.remove(sub_id)
        del self.link_of[sub_id]
        self._annotations = None

    # -- annotation (section 3.1) -------------------------------------------------------------
    def annotate(self) -> dict[int, str]:
        """Node id -> trit vector, bottom up (done by the first match after a change)."""
        if self._annotations is None:
            self._annotations = {}
            self._annotate(self.tree.prepare())
        return self._annotations

    def _annotate(self, node: Node) -> str:
        width = len(self.links)
        if node.attribute is None:
            trits = [N] * width
            for sub_id in node.ids:
                trits[self._position[self.link_of[sub_id]]] = Y
            vector = "".join(trits)
        else:
            # the value children and the implicit all-N child of the values without a branch
            alternatives = [self._annotate(child) for child in node.branches.values()]
            vector = combine([*alternatives, N * width], alternative)
            if node.star is not None:
                vector = combine([vector, self._annotate(node.star)], parallel)
        self._annotations[id(node)] = vector
        return vector

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
        annotations = self.annotate()
        steps = [0]
        refined = self._search(self.tree.prepare(), list(mask), event, annotations, steps)
        return {link for link, trit in zip(self.links, refined) if trit == Y}, steps[0]

    def _search(self, node: Node, mask: list, event, annotations, steps) -> list:
        steps[0] += 1
        vector = annotations[id(node)]
        mask = [vector[k] if trit == M else trit for k, trit in enumerate(mask)]
        if M not in mask or node.attribute is None:
            return mask
        children = []
        child = node.branches.get(event.get(node.attribute, STAR))
        if child is not None:
            children.append(child)
        if node.star is not None:
            children.append(node.star)
        for child in children:
            below = self._search(child, list(mask), event, annotations, steps)
            mask = [Y if trit == M and found == Y else trit for trit, found in zip(mask, below)]
            if M not in mask:
                break
        return [N if trit == M else trit for trit in mask]
