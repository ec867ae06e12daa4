"""The rows of the dispatcher's durable log (:mod:`.log`): its tables, how an event row names
its copies, the copy tuple read from them, and the move of an older layout to this one.

Tables, in the dispatcher's store (``{data}/...``, the same WAL file as its routes)::

    edn_log_event(id INTEGER PRIMARY KEY, topic, event BLOB, created REAL, copies TEXT)
        -- one row per event with an undelivered copy; copies: " s1:17 s3:9 " (server:seq)
    edn_log_position(server PRIMARY KEY, acked)  -- the last seq each server acknowledged
    edn_log_meta(key PRIMARY KEY, value)         -- 'dispatcher': this dispatcher's stable id
    edn_log_upstream(dispatcher PRIMARY KEY, seq) -- a child dispatcher of a dispatch tree: the
        last seq of each parent's batches it logged, in the same transaction as their copies
        (a batch its parent resends after a crash is skipped up to there: nothing twice)

One row per event, whatever its copies: with no summary every event has a copy per server,
and writing a row per copy would be most of the dispatcher's CPU. A server's
copies are the rows naming it, in id order (its seqs grow with the ids); which are still
undelivered follows from its position. What each event still waits for is counted in
memory (rebuilt from the rows at start), so an acknowledgement writes only positions and
the rows of events no server waits for any more.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

from wsframework.migrations import columns

log = logging.getLogger(__name__)

__all__ = ["SCHEMA", "LogCopy", "copy_of", "copies_named", "seq_named", "MIGRATIONS"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS edn_log_event (
    id INTEGER PRIMARY KEY, topic TEXT NOT NULL, event BLOB NOT NULL, created REAL NOT NULL,
    copies TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edn_log_position (server TEXT PRIMARY KEY, acked INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS edn_log_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edn_log_upstream (dispatcher TEXT PRIMARY KEY, seq INTEGER NOT NULL);
"""


class LogCopy(NamedTuple):
    """One copy of an event for one server (a tuple: tens of thousands are made per second
    on the hot path, with :func:`copy_of`). ``seq`` and ``event_id`` are None for a copy
    that is not logged (``durable_log=false``)."""
    server: str
    seq: int | None
    topic: str
    event: bytes
    created: float
    event_id: int | None = None


_tuple_new = tuple.__new__


def copy_of(server: str, seq: int | None, topic: str, event: bytes, created: float,
            event_id: int | None) -> LogCopy:
    """A :class:`LogCopy` built by ``tuple.__new__``: a C call instead of the Python
    ``__new__`` a NamedTuple has (measured: 7% of the dispatcher's CPU without summaries)."""
    return _tuple_new(LogCopy, (server, seq, topic, event, created, event_id))


def copies_named(text: str):
    """(server, seq) of each copy an event row names (" s1:17 s3:9 ")."""
    for part in text.split():
        server, _, seq = part.rpartition(":")
        yield server, int(seq)


def seq_named(text: str, needle: str) -> int | None:
    """The seq of the copy ``needle`` (" server:") names in an event row's copies."""
    at = text.find(needle)
    if at < 0:
        return None
    start = at + len(needle)
    return int(text[start:text.index(" ", start)])


def _move_copy_rows(conn, store) -> None:
    """Move a log of the older layout, one ``edn_log`` row per copy (holding the event's bytes,
    or naming an event row), into ``edn_log_event`` rows; nothing to do when there is no
    ``edn_log`` table (only SQLite stores are that old)."""
    known = columns(conn, "edn_log")
    if not known:
        return
    if "event" in known:  # one row per copy, with the bytes: each becomes an event
        conn.execute("CREATE TABLE IF NOT EXISTS edn_log_event (id INTEGER PRIMARY KEY, "
                     "topic TEXT NOT NULL, event BLOB NOT NULL, created REAL NOT NULL, "
                     "copies TEXT NOT NULL)")
        conn.execute("INSERT INTO edn_log_event(id, topic, event, created, copies) SELECT "
                     "id, topic, event, created, ' ' || server || ':' || seq || ' ' "
                     "FROM edn_log")
    else:  # copy rows naming event rows
        conn.execute("ALTER TABLE edn_log_event ADD COLUMN copies TEXT NOT NULL DEFAULT ''")
        conn.execute("UPDATE edn_log_event SET copies = ' ' || coalesce((SELECT "
                     "group_concat(server || ':' || seq, ' ') FROM edn_log WHERE "
                     "event_id = edn_log_event.id), '') || ' '")
        conn.execute("DELETE FROM edn_log_event WHERE trim(copies) = ''")
    conn.execute("DROP TABLE edn_log")
    log.info("durable log: moved its copy rows into the event rows")


MIGRATIONS = [_move_copy_rows, SCHEMA]
