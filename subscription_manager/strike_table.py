"""Filter strikes per subscription, durable in their own table of the service's store: every
worker of a service adds to one count, and a restart forgets none.

Only active subscriptions have a row. A strike is written only while the subscription's row
is active, checked in the strike's own write transaction (transactions of every worker are
serialized); two triggers delete the row in the transaction that takes the subscription out
of the active state, or deletes its row, whatever the code path (ended by its strikes or for
another reason, unsubscribed, expired, moved to another server, purged). A subscription
adopted back from another server therefore starts from no strikes.
"""
from __future__ import annotations

from typing import Mapping

from wsframework.migrations import Step, migrate

from .lifecycle import State
from .store import SUBSCRIPTIONS_TABLE, SubscriptionStore

__all__ = ["StrikeTable", "STRIKES_TABLE"]

STRIKES_TABLE = "eventing_filter_strikes"
_TABLE = STRIKES_TABLE
_ACTIVE = State.ACTIVE.value

_TABLE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {_TABLE} (
    subscription_id TEXT PRIMARY KEY,
    strikes INTEGER NOT NULL,
    last_reason TEXT,
    updated REAL NOT NULL
);
"""
_TRIGGERS = Step(sqlite=f"""
CREATE TRIGGER IF NOT EXISTS {_TABLE}_left_active AFTER UPDATE OF status ON {SUBSCRIPTIONS_TABLE}
    WHEN NEW.status != '{_ACTIVE}'
    BEGIN DELETE FROM {_TABLE} WHERE subscription_id = NEW.id; END;
CREATE TRIGGER IF NOT EXISTS {_TABLE}_deleted AFTER DELETE ON {SUBSCRIPTIONS_TABLE}
    BEGIN DELETE FROM {_TABLE} WHERE subscription_id = OLD.id; END;
""", postgresql=f"""
CREATE OR REPLACE FUNCTION {_TABLE}_forget() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN DELETE FROM {_TABLE} WHERE subscription_id = OLD.id; RETURN NULL; END $$;
CREATE OR REPLACE TRIGGER {_TABLE}_left_active AFTER UPDATE OF status ON {SUBSCRIPTIONS_TABLE}
    FOR EACH ROW WHEN (NEW.status <> '{_ACTIVE}') EXECUTE FUNCTION {_TABLE}_forget();
CREATE OR REPLACE TRIGGER {_TABLE}_deleted AFTER DELETE ON {SUBSCRIPTIONS_TABLE}
    FOR EACH ROW EXECUTE FUNCTION {_TABLE}_forget();
""")
_MIGRATIONS = [_TABLE_SCHEMA, _TRIGGERS]

_ADD = (f"INSERT INTO {_TABLE} (subscription_id, strikes, last_reason, updated) "
        f"SELECT id, 1, ?, ? FROM {SUBSCRIPTIONS_TABLE} WHERE id = ? AND status = '{_ACTIVE}' "
        "ON CONFLICT(subscription_id) DO UPDATE SET "
        f"strikes = {_TABLE}.strikes + 1, "
        "last_reason = excluded.last_reason, updated = excluded.updated "
        f"RETURNING {_TABLE}.strikes")


class StrikeTable:
    """The strike counts of one service's store. Built over the subscriptions' store (its
    triggers name the subscriptions table, which must exist first)."""

    def __init__(self, subscriptions: SubscriptionStore):
        self.subscriptions = subscriptions
        self.store = subscriptions.store
        migrate(self.store, "strikes", _MIGRATIONS)

    @staticmethod
    def add(conn, failed: Mapping[str, str], now: float) -> dict[str, int]:
        """Inside the caller's write transaction ``conn``: one strike more against each
        subscription of ``failed`` (id -> reason) that is active in the store. Returns id ->
        its strikes now, counted by every worker; an id not active is left out."""
        counts = {}
        for subscription_id, reason in failed.items():
            row = conn.execute(_ADD, (reason, now, subscription_id)).fetchone()
            if row is not None:
                counts[subscription_id] = row[0]
        return counts

    def count(self, subscription_id: str) -> int:
        rows = self.store.query(f"SELECT strikes FROM {_TABLE} WHERE subscription_id = ?",
                                (subscription_id,))
        return rows[0][0] if rows else 0

    def counts(self) -> dict[str, int]:
        """id -> strikes, of every subscription that has any."""
        return {row[0]: row[1] for row in
                self.store.query(f"SELECT subscription_id, strikes FROM {_TABLE}")}
