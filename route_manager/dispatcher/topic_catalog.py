"""The topics a root dispatcher holds, as records its peer roots can merge (no I/O here).

Theory of operation: every topic name has a ``version`` at each root, starting at 1 with
its first create and growing by one with every create or delete of that name there. A
delete leaves a tombstone (``deleted``), so a root that was down or cut off when it
happened still learns it. Merging a peer's record into ours:

=================================  ==========================================================
their version vs ours              outcome
=================================  ==========================================================
higher (or we have no record)      theirs is taken (topic created, redefined or deleted here)
lower                              ours stays (the peer takes ours when it merges our answer)
equal, same content                nothing to do (the same create made at two roots)
equal, different content           a conflict: ours stays and both roots report it; an
                                   operator resolves it by deleting (or re-creating) the
                                   topic at one root, whose higher version then wins
=================================  ==========================================================

Every root applies the same rule to the same records, so the roots converge once they have
exchanged catalogs. Content is the definition servers host the topic with (matcher URI and
the canonical XML of its options); two tombstones of one version are equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from lxml import etree

from wsframework import ns
from wsframework.canonical import canonical_xml

__all__ = ["TopicRecord", "Merge", "canonical_options", "reconcile"]

MAX_VERSION = 2**31 - 1  # the wire's Integer32

# Namespaces an options element inherits from the message it travelled in, not part of it
_ENVELOPE = frozenset({ns.SOAP11, ns.SOAP12, ns.WSA2004, ns.WSA10, ns.ADMIN})


def canonical_options(options: etree._Element | None) -> bytes | None:
    """The options element in exclusive canonical XML: equal definitions compare equal
    whatever attribute order or envelope they travelled in. Every in-scope prefix but the
    envelope's is kept, used or not: a schema's XPaths name prefixes in attribute values."""
    if options is None:
        return None
    keep = [prefix for prefix, uri in options.nsmap.items()
            if prefix and uri not in _ENVELOPE]
    return canonical_xml(options, inclusive_ns_prefixes=keep)


@dataclass(frozen=True)
class TopicRecord:
    name: str
    version: int
    deleted: bool = False
    matcher: str | None = None   # the server matcher URI (None on a tombstone)
    options: bytes | None = None  # canonical options XML (None: none, or a tombstone)

    def __post_init__(self):
        if not 1 <= self.version <= MAX_VERSION:
            raise ValueError(f"topic {self.name}: version must be 1 to {MAX_VERSION}")
        if self.deleted and (self.matcher is not None or self.options is not None):
            raise ValueError(f"topic {self.name}: a deleted topic has no matcher or options")
        if not self.deleted and not self.matcher:
            raise ValueError(f"topic {self.name}: a live topic needs its matcher")

    def same_content(self, other: "TopicRecord") -> bool:
        return (self.deleted, self.matcher, self.options) == (
            other.deleted, other.matcher, other.options)

    def defines(self, matcher: str, options: bytes | None) -> bool:
        """A live topic with exactly this definition."""
        return not self.deleted and (self.matcher, self.options) == (matcher, options)

    def next_version(self) -> int:
        if self.version >= MAX_VERSION:
            raise ValueError(f"topic {self.name} changed {MAX_VERSION} times: no version left")
        return self.version + 1


@dataclass(frozen=True)
class Merge:
    """What merging a peer's records means here: ``take`` (theirs replace ours) and
    ``conflicts`` (ours, theirs) of one version with different content."""

    take: tuple[TopicRecord, ...] = ()
    conflicts: tuple[tuple[TopicRecord, TopicRecord], ...] = ()


def reconcile(ours: Mapping[str, TopicRecord], theirs: Iterable[TopicRecord]) -> Merge:
    take, conflicts = [], []
    for record in theirs:
        mine = ours.get(record.name)
        if mine is None or record.version > mine.version:
            take.append(record)
        elif record.version == mine.version and not mine.same_content(record):
            conflicts.append((mine, record))
    return Merge(tuple(take), tuple(conflicts))
