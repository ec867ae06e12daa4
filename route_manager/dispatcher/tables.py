"""The dispatcher's durable state in the service store (SQLite): registered servers (and
child dispatchers, by kind), every
server's latest summary per route (with its generation, so a reordered update never wins over
a newer one), the topics with the matcher and options the servers host them with, and
the version of every topic name, deleted ones included (:mod:`.topic_catalog`: what peer
roots merge), the run-time settings operators set (Configure) and the events of the latest
recording (:mod:`.recording`). A restarted dispatcher
reloads all of it: it loses no route."""
from __future__ import annotations

import time

from lxml import etree

from wsframework.migrations import columns, migrate
from wsframework.store import Store, upsert_sql

from .topic_catalog import TopicRecord, canonical_options

_SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_servers (
    name TEXT PRIMARY KEY, address TEXT NOT NULL, registered REAL NOT NULL,
    kind TEXT NOT NULL DEFAULT 'server');
CREATE TABLE IF NOT EXISTS edn_summaries (
    route TEXT NOT NULL, server TEXT NOT NULL, generation INTEGER NOT NULL,
    load INTEGER NOT NULL DEFAULT 0, summary BLOB NOT NULL, PRIMARY KEY (route, server));
CREATE TABLE IF NOT EXISTS edn_topics (
    name TEXT PRIMARY KEY, server_matcher TEXT, options BLOB);
CREATE TABLE IF NOT EXISTS edn_topic_versions (
    name TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0);
"""

# a summary replaces a stored one only when newer: two processes that install two
# generations of one server's summary at once leave the newer one stored, whatever the order
_SUMMARY_UPSERT = (upsert_sql("edn_summaries", ("route", "server", "generation", "load",
                                                "summary"), ("route", "server"))
                   + " WHERE edn_summaries.generation < excluded.generation")
# bumped with every change of the servers, the summaries or the topics: a dispatcher of
# several processes reloads what another one committed when it moves (.shared_state)
STATE_GENERATION = "dispatcher:state"
_TOPIC_UPSERT = upsert_sql("edn_topics", ("name", "server_matcher", "options"), ("name",))
_TOPIC_VERSION_UPSERT = upsert_sql("edn_topic_versions", ("name", "version", "deleted"),
                                   ("name",))


def _add_server_columns(conn, store) -> None:
    known = columns(conn, "edn_servers")
    if "kind" not in known:  # a store from before dispatch trees: every node a server
        conn.execute("ALTER TABLE edn_servers ADD COLUMN kind TEXT NOT NULL DEFAULT 'server'")
    if "incarnation" not in known:  # a store from before incarnations: none known
        conn.execute("ALTER TABLE edn_servers ADD COLUMN incarnation INTEGER")


_CONFIGURED = """
CREATE TABLE IF NOT EXISTS edn_configured (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_CONFIGURED_UPSERT = upsert_sql("edn_configured", ("name", "value"), ("name",))

# events recorded for offline profiles (.recording): one recording's rows at a time, each
# process numbering its own
_RECORDED = """
CREATE TABLE IF NOT EXISTS edn_recorded (
    recording TEXT NOT NULL, process TEXT NOT NULL, n INTEGER NOT NULL, at REAL NOT NULL,
    event BLOB NOT NULL, PRIMARY KEY (recording, process, n));
"""

_MIGRATIONS = [_SCHEMA, _add_server_columns, _CONFIGURED, _RECORDED]


class DispatcherTables:
    """The tables, one method per statement the dispatcher runs."""

    def __init__(self, store):
        self.store = store
        migrate(store, "dispatcher", _MIGRATIONS)

    # -- servers -------------------------------------------------------------------------------
    def servers(self) -> list[tuple[str, str, str]]:
        """(name, address, kind) of every registered node below: a subscription server
        (``server``) or a child dispatcher (``dispatcher``)."""
        return [(row["name"], row["address"], row["kind"])
                for row in self.store.query("SELECT name, address, kind FROM edn_servers")]

    def save_server(self, name: str, address: str, kind: str = "server",
                    incarnation: int | None = None) -> int | None:
        """Register (or update) a node; returns the incarnation it had (None: unknown).
        An update without an incarnation keeps the stored one."""
        with self.store.transaction() as conn:
            row = conn.execute("SELECT incarnation FROM edn_servers WHERE name = ?",
                               (name,)).fetchone()
            conn.execute("INSERT INTO edn_servers(name, address, registered, kind, incarnation) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                         "address = excluded.address, registered = excluded.registered, "
                         "kind = excluded.kind, "
                         "incarnation = COALESCE(excluded.incarnation, edn_servers.incarnation)",
                         (name, address, time.time(), kind, incarnation))
            Store.bump(conn, STATE_GENERATION)
        return row[0] if row else None

    def forget_generations(self, server: str) -> None:
        """``server``'s stored summaries stay, but any update of them wins (it was wiped)."""
        with self.store.transaction() as conn:
            conn.execute("UPDATE edn_summaries SET generation = -1 WHERE server = ?", (server,))
            Store.bump(conn, STATE_GENERATION)

    # -- summaries -----------------------------------------------------------------------------
    def summaries(self, route: str) -> list:
        """Rows (server, summary, load, generation) of the summaries stored for ``route``."""
        return self.store.query("SELECT server, summary, load, generation FROM edn_summaries "
                                "WHERE route = ?",
                                (route,))

    def generation(self, route: str, server: str) -> int | None:
        """The generation of ``server``'s stored summary for ``route`` (None: none stored)."""
        row = self.store.query("SELECT generation FROM edn_summaries WHERE route = ? AND server = ?",
                               (route, server))
        return row[0]["generation"] if row else None

    def summary_generations(self) -> dict[tuple[str, str], int]:
        """(route, server) -> generation of every stored summary."""
        return {(row[0], row[1]): row[2] for row in self.store.query(
            "SELECT route, server, generation FROM edn_summaries")}

    def summary(self, route: str, server: str):
        """The row (summary, load, generation) of ``server``'s summary for ``route``, or None."""
        rows = self.store.query("SELECT summary, load, generation FROM edn_summaries "
                                "WHERE route = ? AND server = ?", (route, server))
        return rows[0] if rows else None

    def save_summary(self, route: str, server: str, generation: int, load: int,
                     summary: bytes) -> bool:
        """Store ``server``'s summary for ``route`` unless a newer one is stored already;
        whether it was stored."""
        with self.store.transaction() as conn:
            stored = conn.execute(_SUMMARY_UPSERT, (route, server, generation, load,
                                                    summary)).rowcount
            Store.bump(conn, STATE_GENERATION)
        return bool(stored)

    # -- run-time settings (Configure) ---------------------------------------------------------
    def configured(self) -> dict[str, str]:
        """name -> value of every run-time setting an operator set (Configure), the last
        value of each."""
        return {row[0]: row[1] for row in self.store.query(
            "SELECT name, value FROM edn_configured")}

    def save_configured(self, settings: dict[str, str]) -> None:
        with self.store.transaction() as conn:
            conn.executemany(_CONFIGURED_UPSERT, list(settings.items()))
            Store.bump(conn, STATE_GENERATION)

    # -- recorded events (.recording) ----------------------------------------------------------
    def drop_recordings_but(self, recording: str) -> None:
        """Every recorded event of another recording than ``recording`` deleted."""
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM edn_recorded WHERE recording <> ?", (recording,))

    def save_recorded(self, recording: str, process: str,
                      rows: list[tuple[int, float, bytes]]) -> tuple[int, int]:
        """Store ``rows`` (n, time, event) of ``process``; answers the recording's events
        and bytes stored in all, these included."""
        with self.store.transaction() as conn:
            conn.executemany("INSERT INTO edn_recorded (recording, process, n, at, event) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(recording, process, n, at, event) for n, at, event in rows])
            count, size = conn.execute(
                "SELECT count(*), coalesce(sum(length(event)), 0) FROM edn_recorded "
                "WHERE recording = ?", (recording,)).fetchone()
        return int(count), int(size)

    def recorded_count(self, recording: str) -> int:
        return int(self.store.query("SELECT count(*) FROM edn_recorded WHERE recording = ?",
                                    (recording,))[0][0])

    def recorded(self, recording: str, after: tuple[str, int], limit: int) -> list:
        """Rows (process, n, at, event) of ``recording`` after ``after`` (process, n), in
        that order, at most ``limit``."""
        process, n = after
        return self.store.query(
            "SELECT process, n, at, event FROM edn_recorded WHERE recording = ? AND "
            "(process > ? OR (process = ? AND n > ?)) ORDER BY process, n LIMIT ?",
            (recording, process, process, n, limit))

    # -- topics --------------------------------------------------------------------------------
    def topics(self) -> list:
        """Rows (name, server_matcher, options) of every topic, by name."""
        return self.store.query("SELECT name, server_matcher, options FROM edn_topics ORDER BY name")

    def save_topic(self, name: str, server_matcher: str, options: bytes | None,
                   version: int = 1) -> None:
        with self.store.transaction() as conn:
            conn.execute(_TOPIC_UPSERT, (name, server_matcher, options))
            conn.execute(_TOPIC_VERSION_UPSERT, (name, version, 0))
            Store.bump(conn, STATE_GENERATION)

    def delete_topic(self, name: str, version: int = 1) -> None:
        """The topic and every summary of its route; its tombstone at ``version`` stays."""
        with self.store.transaction() as conn:
            conn.execute("DELETE FROM edn_topics WHERE name = ?", (name,))
            conn.execute("DELETE FROM edn_summaries WHERE route = ?", (name,))
            conn.execute(_TOPIC_VERSION_UPSERT, (name, version, 1))
            Store.bump(conn, STATE_GENERATION)

    def topic_records(self) -> dict[str, TopicRecord]:
        """name -> record of every topic and tombstone. A topic stored before versions
        were kept is at version 1."""
        records = {}
        for row in self.store.query(
                "SELECT t.name, t.server_matcher, t.options, v.version FROM edn_topics t "
                "LEFT JOIN edn_topic_versions v ON v.name = t.name"):
            options = canonical_options(etree.fromstring(row["options"])) if row["options"] else None
            records[row["name"]] = TopicRecord(row["name"], row["version"] or 1,
                                               matcher=row["server_matcher"], options=options)
        for row in self.store.query("SELECT name, version FROM edn_topic_versions "
                                    "WHERE deleted = 1"):
            records.setdefault(row["name"], TopicRecord(row["name"], row["version"], True))
        return records
