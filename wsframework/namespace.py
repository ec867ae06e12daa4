"""The namespace binding layer: a hierarchical namespace whose entries are bound to matchers.

Names are slash-separated paths (``stocks/quotes/nyse``). Each entry is bound to a matcher
instance created from the matcher URI named when the entry was created (XPath by default),
and its address is ``{base}/{kind}/{name}`` (``kind`` is ``topics`` on an event source,
``routes`` on a dispatcher).

The entries live in a trie (longest-prefix resolution for addresses below an entry) that is
a cache of the durable store: :meth:`Namespace.sync` reloads it when another process has
changed the store, keeping the matcher instances of entries that did not change. Listeners
hear about entries that appear and disappear (the subscription manager re-fills a new
entry's matcher from its own store).
"""
from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterator

from lxml import etree


from .migrations import migrate
from .exceptions import WsFrameworkError
from .matching import DEFAULT_MATCHER_URI, Matcher, create_matcher
from .store import Store
from .xmlparse import parse_xml

log = logging.getLogger(__name__)

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._~-]{0,63}")  # fullmatch: "$" would allow a trailing newline
MAX_SEGMENTS = 16


class NamespaceError(WsFrameworkError):
    pass


class InvalidName(NamespaceError):
    pass


class EntryExists(NamespaceError):
    pass


class UnknownEntry(NamespaceError, KeyError):
    """No entry of that name; ``kind`` is what the namespace holds ("topic", "route")."""

    def __init__(self, name: str, kind: str = "entry"):
        super().__init__(name)
        self.name = name
        self.kind = kind

    def __str__(self):
        return f"no {self.kind} named {self.name!r}"


def validate_name(name: str) -> str:
    if not isinstance(name, str):
        raise InvalidName("a name must be a string")
    cleaned = name.strip().strip("/")
    segments = cleaned.split("/")
    if not cleaned or len(segments) > MAX_SEGMENTS or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidName(f"invalid name {name!r}: use 1 to {MAX_SEGMENTS} slash-separated "
                          "segments of letters, digits and ._~- (not starting with . - ~)")
    return cleaned


@dataclass
class NamespaceEntry:
    name: str
    matcher_uri: str
    matcher: Matcher
    uid: str
    created: float
    config: bytes | None = None

    def config_element(self) -> etree._Element | None:
        return parse_xml(self.config) if self.config else None


@dataclass
class _Node:
    children: dict[str, "_Node"] = field(default_factory=dict)
    entry: NamespaceEntry | None = None


class Namespace:
    def __init__(self, kind: str, store: Store, base_url: str = ""):
        if not re.match(r"^[a-z]+$", kind):
            raise ValueError("namespace kind must be lowercase letters")
        self.kind = kind
        self.store = store
        self.base_url = base_url.rstrip("/")
        self._table = f"ns_{kind}"
        self._generation_name = f"namespace:{kind}"
        self._root = _Node()
        self._entries: dict[str, NamespaceEntry] = {}
        self._lock = threading.RLock()
        self._applied = -1
        self._listeners: list[Callable[[str, NamespaceEntry], None]] = []
        migrate(store, self._table, [
            f"CREATE TABLE IF NOT EXISTS {self._table} (name TEXT PRIMARY KEY, uid TEXT NOT NULL, "
            "matcher TEXT NOT NULL, config BLOB, created REAL NOT NULL)"])
        self.sync()

    # -- listeners -------------------------------------------------------------------------
    def on_change(self, listener: Callable[[str, NamespaceEntry], None]) -> None:
        """``listener(event, entry)`` with event 'added' or 'removed', called under the lock."""
        self._listeners.append(listener)

    def _notify(self, event: str, entry: NamespaceEntry) -> None:
        for listener in self._listeners:
            try:
                listener(event, entry)
            except Exception:
                log.exception("namespace listener failed on %s %s", event, entry.name)

    # -- addresses -------------------------------------------------------------------------
    def address_of(self, name: str) -> str:
        return f"{self.base_url}/{self.kind}/{name}"

    def path_of(self, name: str) -> str:
        return f"/{self.kind}/{name}"

    def name_from_path(self, path: str) -> str | None:
        prefix = f"/{self.kind}/"
        return path[len(prefix):].strip("/") if path.startswith(prefix) else None

    # -- mutations (durable first, then the cache) ------------------------------------------
    def create(self, name: str, matcher_uri: str | None = None,
               config: etree._Element | None = None) -> NamespaceEntry:
        name = validate_name(name)
        uri = matcher_uri or DEFAULT_MATCHER_URI
        matcher = create_matcher(uri, config)  # raises UnknownMatcher before anything is stored
        blob = etree.tostring(config) if config is not None else None
        entry = NamespaceEntry(name, uri, matcher, uuid.uuid4().hex, time.time(), blob)
        with self._lock:
            self.sync()
            with self.store.transaction() as conn:
                if conn.execute(f"SELECT 1 FROM {self._table} WHERE name = ?", (name,)).fetchone():
                    raise EntryExists(f"{self.kind[:-1]} {name!r} already exists")
                conn.execute(f"INSERT INTO {self._table}(name, uid, matcher, config, created) "
                             "VALUES (?, ?, ?, ?, ?)", (name, entry.uid, uri, blob, entry.created))
                generation = Store.bump(conn, self._generation_name)
            self._insert(entry)
            self._advance(generation)
        return entry

    def delete(self, name: str) -> NamespaceEntry | None:
        name = validate_name(name)
        with self._lock:
            self.sync()
            with self.store.transaction() as conn:
                deleted = conn.execute(f"DELETE FROM {self._table} WHERE name = ?", (name,)).rowcount
                if not deleted:
                    raise UnknownEntry(name, self.kind[:-1])
                generation = Store.bump(conn, self._generation_name)
            # An entry whose matcher could not be bound in this process (plugin missing here)
            # is in the store but not in the cache: deleting it is still a success.
            entry = self._remove(name) if name in self._entries else None
            self._advance(generation)
        return entry

    def _advance(self, generation: int) -> None:
        # Our own write moved the generation by one; if someone else wrote in between,
        # leave _applied behind so the next sync reloads.
        if generation == self._applied + 1:
            self._applied = generation

    # -- lookups ---------------------------------------------------------------------------
    def get(self, name: str) -> NamespaceEntry:
        entry = self._entries.get(name.strip("/"))
        if entry is None:
            raise UnknownEntry(name, self.kind[:-1])
        return entry

    def __contains__(self, name: str) -> bool:
        return name.strip("/") in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def resolve(self, name: str) -> tuple[NamespaceEntry, str] | None:
        """Longest-prefix resolution: the deepest entry at or above ``name`` and the rest of
        the path below it ('' for an exact hit)."""
        node = self._root
        best = None
        segments = [s for s in name.strip("/").split("/") if s]
        for depth, segment in enumerate(segments):
            node = node.children.get(segment)
            if node is None:
                break
            if node.entry is not None:
                best = (node.entry, "/".join(segments[depth + 1:]))
        return best

    def entries(self, prefix: str | None = None) -> Iterator[NamespaceEntry]:
        prefix = (prefix or "").strip("/")
        for name in sorted(self._entries):
            if not prefix or name == prefix or name.startswith(prefix + "/"):
                yield self._entries[name]

    # -- cache maintenance -----------------------------------------------------------------
    @property
    def generation_name(self) -> str:
        """The name of this namespace's generation in the store (bumped by every change)."""
        return self._generation_name

    def sync(self, generation: int | None = None) -> bool:
        """Reload from the store if another process or thread changed it; True if reloaded.
        ``generation``: the stored generation when the caller read it already."""
        if generation is None:
            generation = self.store.generation(self._generation_name)
        if generation == self._applied:
            return False
        with self._lock:
            generation = self.store.generation(self._generation_name)
            if generation == self._applied:
                return False
            rows = self.store.query(f"SELECT name, uid, matcher, config, created FROM {self._table}")
            stored = {row["name"]: row for row in rows}
            for name in [n for n, e in self._entries.items()
                         if n not in stored or stored[n]["uid"] != e.uid]:
                self._remove(name)
            for name, row in stored.items():
                if name in self._entries:
                    continue
                try:
                    config = parse_xml(row["config"]) if row["config"] else None
                    matcher = create_matcher(row["matcher"], config)
                except Exception as exc:
                    # A plugin missing in this process must not take the others down.
                    log.error("cannot bind %s %r to matcher %s: %s", self.kind, name, row["matcher"], exc)
                    continue
                self._insert(NamespaceEntry(name, row["matcher"], matcher, row["uid"],
                                            row["created"], row["config"]))
            self._applied = generation
            return True

    def _insert(self, entry: NamespaceEntry) -> None:
        node = self._root
        for segment in entry.name.split("/"):
            node = node.children.setdefault(segment, _Node())
        node.entry = entry
        self._entries[entry.name] = entry
        self._notify("added", entry)

    def _remove(self, name: str) -> NamespaceEntry:
        entry = self._entries.pop(name)
        path = [self._root]
        for segment in name.split("/"):
            path.append(path[-1].children[segment])
        path[-1].entry = None
        # prune empty branches
        for parent, segment in zip(reversed(path[:-1]), reversed(name.split("/"))):
            child = parent.children[segment]
            if child.entry is None and not child.children:
                del parent.children[segment]
            else:
                break
        self._notify("removed", entry)
        return entry
