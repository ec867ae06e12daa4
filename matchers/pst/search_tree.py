"""Gryphon's parallel search tree (Aguilera et al., "Matching events in a content-based
subscription system", PODC 1999, as summarised in section 2 of Gryphon's link-matching
paper, Banavar et al., ICDCS 1999).

Subscriptions are conjunctions of equality tests ``{attribute: value}``; an attribute a
subscription does not test is a don't-care (``*``). The tree has one level per attribute; a
node has value branches and a ``*`` branch, and leaves hold subscription ids. Matching follows,
at each node, the branch of the event's value *and* the ``*`` branch, in parallel::

    tree = ParallelSearchTree(["a1", "a2", "a3"])
    tree.add("s1", {"a1": 1, "a3": 3})
    tree.match({"a1": 1, "a2": 2, "a3": 3})            # -> ["s1"]
    tree.match_counting({"a1": 1, "a2": 2, "a3": 3})   # -> (["s1"], steps)

Attributes are ordered from the root by fewest don't-cares (the paper: "performance seems to be
better if the attributes near the root are chosen to have the fewest number of subscriptions
labeled with a *"), computed when the tree is prepared: changes are batched and the structure
is rebuilt on the next match (the paper's "tree preparation time").

The section 2.1 optimisations:

* **Trivial-test elimination** (always on): a level that only a ``*`` branch leaves is
  skipped, no node is made for it, so a search spends no step there.
* **Factoring** (``factoring=("a1", "a2")``, or a count: that many attributes with the fewest
  don't-cares): the factoring attributes become an :class:`Index`, one entry per combination
  of their values, each entry holding a sub-search-tree over the other attributes. A
  subscription with ``*`` on a factoring attribute is *copied* into the entry of every value
  of that attribute, plus the entry of :data:`OTHER` (standing for every value no
  subscription tests there). That is the paper's "at the cost of increased space", and why
  it prefers attributes that subscriptions "rarely" leave ``*``: the copies are the
  don't-cares. A search then does one lookup of the event's combination and searches one
  sub-tree; the forks the top levels would have made between value and ``*`` branches are
  gone.
* **Delayed branching** (``delayed_branching=k``, ``True`` for :data:`DEFAULT_DELAY`): the
  paper says "traversing *-branches may be delayed until after a set of predicate tests have
  been applied", which "prunes paths from those *-branches which are inconsistent with the
  tests". Here a :class:`Delayed` node stands for a *set* of tree nodes that a plain search
  would visit in parallel; it applies one attribute test for all of them at once and leads
  to the set that survives the test (each member's branch of the event's value and its
  ``*`` branch; a member that tests a later attribute, or is a leaf, is carried along). The
  ``*`` branches are thus not traversed one by one: they are carried, unvisited, through a
  window of ``k`` tests, and a member with neither the event's value nor a ``*`` branch
  (an inconsistent path) is dropped without ever being visited. At the end of the window the
  surviving nodes are searched in parallel, each starting a window of its own. Equal sets
  share one node, so the structure is a DAG, as the paper warns ("no longer a tree but
  instead a directed acyclic graph").

A **step** is the visit of one node of the matching structure (Chart 3 of the paper counts
these: "the visitation of a single node in the matching tree"): a tree node (one attribute
test, or a leaf), a :class:`Delayed` node (one attribute test for a set of nodes), or an
:class:`Index` (one lookup of the factoring attributes' values). Each does one dictionary
lookup of the event's values, so steps compare like with like with and without the options.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping, Sequence

__all__ = ["ParallelSearchTree", "Node", "Delayed", "Index", "STAR", "OTHER", "DEFAULT_DELAY",
           "successors", "children", "leaves_below"]

STAR = object()   # the don't-care branch
OTHER = object()  # in a factoring key: any value no subscription tests on that attribute

DEFAULT_DELAY = 3       # tests per delayed-branching window when ``delayed_branching=True``
MAX_DELAY = 8           # a longer window makes sets (and space) grow as 2 ** window
MAX_INDEX_KEYS = 4096   # combinations of factoring values an index may have
MAX_COPIES = 64         # mean copies of a subscription factoring may make ...
COPIES_ALWAYS_ALLOWED = 1 << 16   # ... once the copies are more than this many


@dataclass
class Node:
    """A test of ``attribute`` (None at a leaf); ``ids``: the subscriptions of a leaf."""

    attribute: str | None = None
    branches: dict = field(default_factory=dict)  # value -> Node
    star: "Node | None" = None
    ids: list = field(default_factory=list)


@dataclass(eq=False)
class Delayed:
    """Delayed branching: one test of ``attribute`` for a set of nodes searched in parallel.
    ``branches``: value -> the nodes to search next; ``other``: those for any other value
    (the members' ``*`` branches and the members that do not test ``attribute``)."""

    attribute: str
    branches: dict
    other: tuple


@dataclass(eq=False)
class Index:
    """Factoring: the sub-tree of each combination of values of ``attributes``. A value no
    subscription tests is looked up as :data:`OTHER`; ``complete``: every combination has
    an entry (else the missing ones match nothing)."""

    attributes: tuple
    domains: tuple          # per attribute, the values some subscription tests
    entries: dict           # key tuple -> root of its sub-tree
    complete: bool

    def key(self, event: Mapping[str, Hashable]) -> tuple:
        return tuple(value if (value := event.get(a, OTHER)) in domain else OTHER
                     for a, domain in zip(self.attributes, self.domains))


def successors(node, event: Mapping[str, Hashable]) -> Sequence:
    """The nodes a search at ``node`` goes on to for ``event`` (none at a leaf)."""
    if type(node) is Node:
        if node.attribute is None:
            return ()
        child = node.branches.get(event.get(node.attribute, STAR))
        if child is None:
            return (node.star,) if node.star is not None else ()
        return (child, node.star) if node.star is not None else (child,)
    if type(node) is Delayed:
        return node.branches.get(event.get(node.attribute, STAR), node.other)
    child = node.entries.get(node.key(event))
    return (child,) if child is not None else ()


def children(node) -> list:
    """Every node ``node`` can lead to, whatever the event."""
    if type(node) is Node:
        return [*node.branches.values(), *([node.star] if node.star is not None else [])]
    if type(node) is Delayed:
        return [n for group in (*node.branches.values(), node.other) for n in group]
    return list(node.entries.values())


class ParallelSearchTree:
    def __init__(self, attributes: Sequence[str], *, order: Sequence[str] | None = None,
                 factoring: Sequence[str] | int = (), delayed_branching: int | bool = 0):
        """``order``: the attributes from the root down (default: fewest don't-cares first,
        chosen at each preparation). ``factoring``: the attributes of the index, or how many
        of the first in the order (none by default). ``delayed_branching``: tests per window
        (0 or False: off, the default; True: :data:`DEFAULT_DELAY`)."""
        self.attributes = tuple(attributes)
        if order is not None and (len(order) != len(self.attributes)
                                  or set(order) != set(self.attributes)):
            raise ValueError("order must name every attribute once")
        self.fixed_order = tuple(order) if order is not None else None
        if isinstance(factoring, int):
            if not 0 <= factoring <= len(self.attributes):
                raise ValueError(f"factoring count {factoring} outside 0..{len(self.attributes)}")
        elif set(factoring) - set(self.attributes) or len(set(factoring)) != len(factoring):
            raise ValueError("factoring must name distinct attributes of the tree")
        self.factoring = factoring if isinstance(factoring, int) else tuple(factoring)
        delay = DEFAULT_DELAY if delayed_branching is True else int(delayed_branching)
        if not 0 <= delay <= MAX_DELAY:
            raise ValueError(f"delayed_branching takes a window of 0..{MAX_DELAY} tests")
        self.delay = delay
        self.subscriptions: dict[Hashable, dict[str, Hashable]] = {}
        self._root = None
        self.order: tuple[str, ...] = self.fixed_order or self.attributes
        #: the factoring attributes chosen at the last preparation
        self.factored: tuple[str, ...] = ()

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
    def prepare(self):
        """Build the structure for the current subscriptions (done by the first match after a
        change) and return its root: a :class:`Node`, a :class:`Delayed` node or an
        :class:`Index`."""
        if self._root is None:
            if self.fixed_order is None:
                cares = {a: 0 for a in self.attributes}
                for tests in self.subscriptions.values():
                    for attribute in tests:
                        cares[attribute] += 1
                self.order = tuple(sorted(self.attributes, key=lambda a: (-cares[a],
                                                                           self.attributes.index(a))))
            if isinstance(self.factoring, int):
                self.factored = self.order[:self.factoring]
            else:
                self.factored = self.factoring
            rest = tuple(a for a in self.order if a not in self.factored)
            self.order = (*self.factored, *rest)
            delayer = _Delayer(self.delay, rest) if self.delay else None
            if self.factored:
                self._root = self._build_index(rest, delayer)
            else:
                self._root = self._finish(self._build(list(self.subscriptions.items()), 0, rest),
                                          delayer)
        return self._root

    @staticmethod
    def _finish(root: Node, delayer: "_Delayer | None"):
        return delayer.start(root) if delayer is not None else root

    def _build(self, members: list, level: int, order: tuple) -> Node:
        # skip the levels no member tests: trivial-test elimination
        while level < len(order) and all(order[level] not in t for _, t in members):
            level += 1
        if level == len(order):
            return Node(ids=[sub_id for sub_id, _ in members])
        attribute = order[level]
        node = Node(attribute)
        groups: dict = {}
        starred = []
        for sub_id, tests in members:
            if attribute in tests:
                groups.setdefault(tests[attribute], []).append((sub_id, tests))
            else:
                starred.append((sub_id, tests))
        node.branches = {value: self._build(group, level + 1, order)
                         for value, group in groups.items()}
        node.star = self._build(starred, level + 1, order) if starred else None
        return node

    def _build_index(self, rest: tuple, delayer: "_Delayer | None") -> Index:
        factored = self.factored
        domains = tuple(tuple(dict.fromkeys(t[a] for t in self.subscriptions.values() if a in t))
                        for a in factored)
        keys = math.prod(len(domain) + 1 for domain in domains)
        if keys > MAX_INDEX_KEYS:
            raise ValueError(f"factoring on {list(factored)} makes {keys} index entries (limit "
                             f"{MAX_INDEX_KEYS}): factor on fewer attributes or fewer values")
        copies = sum(math.prod(1 if a in t else len(domain) + 1 for a, domain in zip(factored, domains))
                     for t in self.subscriptions.values())
        if copies > max(MAX_COPIES * len(self.subscriptions), COPIES_ALWAYS_ALLOWED):
            raise ValueError(f"factoring on {list(factored)} copies the subscriptions {copies} "
                             f"times (limit {MAX_COPIES} each): choose attributes subscriptions "
                             f"rarely leave '*'")
        grouped: dict = {}
        for sub_id, tests in self.subscriptions.items():
            # a '*' on a factoring attribute: the subscription goes into every value's entry
            choices = [(tests[a],) if a in tests else (*domain, OTHER)
                       for a, domain in zip(factored, domains)]
            remaining = {a: v for a, v in tests.items() if a not in factored}
            for key in itertools.product(*choices):
                grouped.setdefault(key, []).append((sub_id, remaining))
        entries = {key: self._finish(self._build(members, 0, rest), delayer)
                   for key, members in grouped.items()}
        return Index(factored, tuple(frozenset(d) for d in domains), entries,
                     complete=len(entries) == keys)

    # -- matching ----------------------------------------------------------------------------
    def match(self, event: Mapping[str, Hashable]) -> list:
        return self.match_counting(event)[0]

    def match_counting(self, event: Mapping[str, Hashable]) -> tuple[list, int]:
        """The matching subscription ids and the number of nodes visited (steps)."""
        root = self.prepare()
        if not self.subscriptions:
            return [], 0
        found: list = []
        steps = 0
        stack = [root]
        while stack:
            node = stack.pop()
            steps += 1
            if type(node) is Node and node.attribute is None:
                found.extend(node.ids)
            else:
                stack.extend(successors(node, event))
        return found, steps

    def leaves(self) -> Iterable[Node]:
        return leaves_below(self.prepare())


def leaves_below(root) -> Iterable[Node]:
    """The leaves ``root`` leads to, each once (a DAG shares some)."""
    seen = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) is Node and node.attribute is None:
            yield node
        else:
            stack.extend(children(node))


class _Delayer:
    """Turns a tree into delayed-branching windows of ``window`` tests (see the module
    docstring). A set of tree nodes searched in parallel becomes one :class:`Delayed` node per
    test; equal sets at equal depths in a window share it."""

    def __init__(self, window: int, order: tuple) -> None:
        self.window = window
        self.level = {a: k for k, a in enumerate(order)}
        self._made: dict = {}

    def start(self, node: Node):
        """``node`` as the start of a window (a leaf stays itself)."""
        if node.attribute is None:
            return node
        return self._targets((node,), 0)[0]

    def _targets(self, members: tuple, depth: int) -> tuple:
        """What a search visits for the tree nodes ``members``, ``depth`` tests into a
        window: one :class:`Delayed` node, or at the window's end the members themselves,
        each starting a window of its own."""
        inner = [m for m in members if m.attribute is not None]
        if not inner:
            return members
        if depth == self.window:
            return tuple(self.start(m) for m in members)
        key = (frozenset(map(id, members)), depth)
        made, _ = self._made.get(key, (None, None))
        if made is None:
            attribute = min((m.attribute for m in inner), key=self.level.__getitem__)
            testing = [m for m in inner if m.attribute == attribute]
            carried = [m for m in members if m.attribute != attribute]
            stars = [m.star for m in testing if m.star is not None]
            values = dict.fromkeys(v for m in testing for v in m.branches)
            branches = {}
            for value in values:
                chosen = [m.branches[value] for m in testing if value in m.branches]
                branches[value] = self._targets((*carried, *chosen, *stars), depth + 1)
            rest = (*carried, *stars)
            made = Delayed(attribute, branches, self._targets(rest, depth + 1) if rest else ())
            # the members are kept with it: their ids are in the key, and must not be reused
            self._made[key] = made, members
        return (made,)
