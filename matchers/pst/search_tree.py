"""Gryphon's parallel search tree (Aguilera et al., "Matching events in a content-based
subscription system", summarised in gryphon-link-matching.txt section 2).

Subscriptions are conjunctions of equality tests ``{attribute: value}``; an attribute a
subscription does not test is a don't-care (``*``). The tree has one level per attribute; a
node has value branches and a ``*`` branch, and leaves hold subscription ids. Matching follows,
at each node, the branch of the event's value *and* the ``*`` branch, in parallel::

    tree = ParallelSearchTree(["a1", "a2", "a3"])
    tree.add("s1", {"a1": 1, "a3": 3})
    tree.match({"a1": 1, "a2": 2, "a3": 3})            # -> ["s1"]
    tree.match_counting({"a1": 1, "a2": 2, "a3": 3})   # -> (["s1"], steps)

A **step** is the visit of one node (Chart 3 of the seed counts these). Attributes are
ordered from the root by fewest don't-cares (the seed: "performance seems to be better if the
attributes near the root are chosen to have the fewest number of subscriptions labeled with a
*"), computed when the tree is prepared: changes are batched and the tree is rebuilt on the
next match (the seed's "tree preparation time").

Trivial-test elimination (section 2.1, 2) is built in: a level that only a ``*`` branch
leaves is skipped, no node is made for it, so a search spends no step there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping, Sequence

__all__ = ["ParallelSearchTree", "Node", "STAR"]

STAR = object()  # the don't-care branch


@dataclass
class Node:
    """A test of ``attribute`` (None at a leaf); ``ids``: the subscriptions of a leaf."""

    attribute: str | None = None
    branches: dict = field(default_factory=dict)  # value -> Node
    star: "Node | None" = None
    ids: list = field(default_factory=list)


class ParallelSearchTree:
    def __init__(self, attributes: Sequence[str], *, order: Sequence[str] | None = None):
        """``order``: the attributes from the root down (default: fewest don't-cares first,
        chosen at each preparation)."""
        self.attributes = tuple(attributes)
        if order is not None and set(order) != set(self.attributes):
            raise ValueError("order must name every attribute once")
        self.fixed_order = tuple(order) if order is not None else None
        self.subscriptions: dict[Hashable, dict[str, Hashable]] = {}
        self._root: Node | None = None
        self.order: tuple[str, ...] = self.fixed_order or self.attributes

    # -- subscriptions -----------------------------------------------------------------------
    def add(self, sub_id: Hashable, tests: Mapping[str, Hashable]) -> None:
        unknown = set(tests) - set(self.attributes)
        if unknown:
            raise ValueError(f"unknown attributes {sorted(unknown)}")
        self.subscriptions[sub_id] = dict(tests)
        self._root = None

    def remove(self, sub_id: Hashable) -> None:
        del self.subscriptions[sub_id]
        self._root = None

    def __len__(self) -> int:
        return len(self.subscriptions)

    # -- preparation -------------------------------------------------------------------------
    def prepare(self) -> Node:
        """Build the tree for the current subscriptions (done by the first match after a
        change)."""
        if self._root is None:
            if self.fixed_order is None:
                cares = {a: 0 for a in self.attributes}
                for tests in self.subscriptions.values():
                    for attribute in tests:
                        cares[attribute] += 1
                self.order = tuple(sorted(self.attributes, key=lambda a: (-cares[a],
                                                                           self.attributes.index(a))))
            self._root = self._build(list(self.subscriptions.items()), 0)
        return self._root

    def _build(self, members: list, level: int) -> Node:
        # skip the levels no member tests: trivial-test elimination
        while level < len(self.order) and all(self.order[level] not in t for _, t in members):
            level += 1
        if level == len(self.order):
            return Node(ids=[sub_id for sub_id, _ in members])
        attribute = self.order[level]
        node = Node(attribute)
        groups: dict = {}
        starred = []
        for sub_id, tests in members:
            if attribute in tests:
                groups.setdefault(tests[attribute], []).append((sub_id, tests))
            else:
                starred.append((sub_id, tests))
        node.branches = {value: self._build(group, level + 1) for value, group in groups.items()}
        node.star = self._build(starred, level + 1) if starred else None
        return node

    # -- matching ----------------------------------------------------------------------------
    def match(self, event: Mapping[str, Hashable]) -> list:
        return self.match_counting(event)[0]

    def match_counting(self, event: Mapping[str, Hashable]) -> tuple[list, int]:
        """The matching subscription ids and the number of nodes visited."""
        root = self.prepare()
        if not self.subscriptions:
            return [], 0
        found: list = []
        steps = 0
        stack = [root]
        while stack:
            node = stack.pop()
            steps += 1
            if node.attribute is None:
                found.extend(node.ids)
                continue
            child = node.branches.get(event.get(node.attribute, STAR))
            if child is not None:
                stack.append(child)
            if node.star is not None:
                stack.append(node.star)
        return found, steps

    def leaves(self) -> Iterable[Node]:
        stack = [self.prepare()]
        while stack:
            node = stack.pop()
            if node.attribute is None:
                yield node
            else:
                stack.extend(node.branches.values())
                if node.star is not None:
                    stack.append(node.star)
