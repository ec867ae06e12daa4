"""Versioned schema migrations, one numbered list of steps per component of a store.

``migrate(store, "outbox", STEPS)`` applies the steps the store has not had yet, in order,
each in the store's write transaction with the component's new version (so any number of
processes may start at once: one applies, the others find it done), and records the
component's version in ``schema_versions``. A step is SQL in SQLite's dialect (PostgreSQL
gets it translated), a :class:`Step` with one text per dialect where they differ (triggers),
or a function of ``(conn, store)`` for a change that depends on what is there.

Steps are append-only: a released step is never edited, a change is a new step. The first
step of every component is ``CREATE ... IF NOT EXISTS``, which a store made before migrations
were versioned already has; steps after it check what they add (:func:`columns`), so such a
store is migrated without error.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Callable, Sequence, Union

__all__ = ["Step", "migrate", "columns", "version_of"]

_VERSIONS = ("CREATE TABLE IF NOT EXISTS schema_versions ("
             "component TEXT PRIMARY KEY, version INTEGER NOT NULL)")


@dataclass(frozen=True)
class Step:
    """A step written once per dialect (``sqlite``, ``postgresql``)."""
    sqlite: str
    postgresql: str


StepLike = Union[str, Step, Callable]


def migrate(store, component: str, steps: Sequence[StepLike]) -> int:
    """Bring ``component``'s schema in ``store`` to ``len(steps)``; returns the version."""
    target = len(steps)
    current = version_of(store, component)
    if current == target:  # the common start: nothing to do, no lock
        return target
    _check_not_newer(component, current, target)
    with store.transaction() as conn:
        conn.execute(_VERSIONS)
        row = conn.execute("SELECT version FROM schema_versions WHERE component = ?",
                           (component,)).fetchone()
        current = row[0] if row else 0
        _check_not_newer(component, current, target)
        for step in steps[current:]:
            _apply(store, conn, step)
        conn.execute("INSERT INTO schema_versions(component, version) VALUES (?, ?) "
                     "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                     (component, target))
    return target


def _check_not_newer(component: str, current: int, target: int) -> None:
    if current > target:
        raise RuntimeError(f"the store's {component} schema is version {current}, newer than "
                           f"this code's {target}: run the newer code")


def version_of(store, component: str) -> int:
    try:
        rows = store.query("SELECT version FROM schema_versions WHERE component = ?",
                           (component,))
    except Exception as exc:  # no table yet: a store never migrated
        if not _no_table(exc):
            raise
        return 0
    return rows[0][0] if rows else 0


def columns(conn, table: str) -> set[str]:
    """The names of ``table``'s columns (empty if there is no such table)."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _apply(store, conn, step: StepLike) -> None:
    if callable(step):
        step(conn, store)
        return
    if isinstance(step, Step):
        step = step.postgresql if store.dialect == "postgresql" else step.sqlite
    if store.dialect == "postgresql":
        conn.executescript(step)  # one round trip; PostgreSQL runs a script in the transaction
        return
    for statement in _statements(step):
        conn.execute(statement)


def _statements(script: str) -> list[str]:
    """A script's statements, one by one (SQLite's ``executescript`` would commit the
    migration's transaction first); a trigger's body stays whole."""
    statements, buffer = [], ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n\t;"):
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip(" \n\t;"):
        statements.append(buffer.strip())
    return statements


def _no_table(exc: Exception) -> bool:
    return "no such table" in str(exc) or "does not exist" in str(exc)
