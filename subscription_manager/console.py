"""An event source's (standalone or EDN server) panels of the web console
(:mod:`wsframework.console`): its topics with their active subscriptions, its counters, and
its dead letters, which the operator browses, redelivers and purges: the outbox's own
operations, the ones the dead-letter admin messages run (:mod:`.deadletters`)."""
from __future__ import annotations

import logging

from wsframework.console import ConsoleError, console_of

from .deadletters import MAX_IDS, _when
from .outbox import MAX_DEAD_LETTER_LIST

__all__ = ["install_console"]

log = logging.getLogger(__name__)


def install_console(service) -> None:
    manager = service.subscription_manager
    console = console_of(service)
    console.add_api("topics", lambda call: topics(manager))
    console.add_api("summary", lambda call: summary(manager))
    console.add_api("dead-letters", lambda call: dead_letters(manager, call.params))
    console.add_api("redeliver", lambda call: redeliver(manager, call.params), action=True)
    console.add_api("purge", lambda call: purge(manager, call.params), action=True)


def topics(manager) -> dict:
    """Each topic and its active subscriptions, every worker's: the store's counts, read in
    one query whatever the number of subscriptions (the metrics read them every second)."""
    _, counts = manager.store.active_counts()
    return {"topics": [{"name": entry.name, "subscriptions": counts.get(entry.uid, 0)}
                       for entry in list(manager.topics.entries())]}


def summary(manager) -> dict:
    stats = manager.stats() if hasattr(manager, "stats") else manager.counters
    return {"figures": {key: value for key, value in sorted(stats.items())
                        if isinstance(value, (int, float, str))}}


def dead_letters(manager, params: dict) -> dict:
    try:
        limit = int(params.get("limit") or 100)
    except ValueError:
        raise ConsoleError(400, "limit must be a number") from None
    if not 1 <= limit <= MAX_DEAD_LETTER_LIST:
        raise ConsoleError(400, f"limit must be 1 to {MAX_DEAD_LETTER_LIST}")
    letters = manager.outbox.dead_letters(limit=limit)
    return {"total": manager.outbox.dead_letter_count(), "letters": [
        {"id": d.id, "subscription": d.subscription_id, "topic": d.topic, "url": d.url,
         "reason": d.reason, "attempts": d.attempts, "dead_at": _when(d.dead_at),
         "last_attempt": _when(d.last_attempt), "size": d.size, "message_id": d.message_id}
        for d in letters]}


def _selection(params: dict, action: str) -> list[int] | None:
    """``{"ids": [1, 2]}`` (the ids) or ``{"all": true}`` (None), nothing else."""
    ids, every = params.get("ids"), params.get("all")
    unknown = set(params) - {"ids", "all"}
    if unknown:
        raise ConsoleError(400, f"unknown field {sorted(unknown)[0][:40]!r}")
    if every is not None and every is not True:
        raise ConsoleError(400, "all must be true (or absent)")
    if (ids is not None) == bool(every):
        raise ConsoleError(400, f"{action} needs ids or all, not both")
    if every:
        return None
    if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS or not all(
            isinstance(i, int) and not isinstance(i, bool) and 1 <= i < 2 ** 63 for i in ids):
        raise ConsoleError(400, f"ids must be 1 to {MAX_IDS} positive integers")
    return ids


def redeliver(manager, params: dict) -> dict:
    ids = _selection(params, "redeliver")
    moved = manager.outbox.redeliver(ids)
    if moved:
        try:  # queue them now rather than at the next sweep (the rows are committed)
            manager.recover_outbox()
        except Exception:
            log.exception("queueing redelivered dead letters failed")
    unknown = sorted(set(ids or ()) - set(moved))
    message = f"redelivered {len(moved)} dead letter{'s' if len(moved) != 1 else ''}"
    if unknown:
        message += f"; unknown: {', '.join(map(str, unknown[:10]))}"
    return {"redelivered": len(moved), "unknown": unknown, "message": message}


def purge(manager, params: dict) -> dict:
    ids = _selection(params, "purge")
    purged = manager.outbox.purge(ids)
    return {"purged": purged,
            "message": f"purged {purged} dead letter{'s' if purged != 1 else ''}"}
