"""Dead-letter administration: three admin messages every event source (standalone source and
EDN subscription server) answers at ``{base}/admin``, authenticated like every admin message
(``adm:AdminToken``), declared with the base registry as any application declares its own::

    ListDeadLetters {Topic?, Subscription?, Limit?}  -> ListDeadLettersResponse
                                                         {Total, DeadLetter* {Id, Subscription,
                                                          Topic, Url, Reason, Attempts,
                                                          FirstAttempt?, LastAttempt?, DeadAt,
                                                          Size, MessageId}}
    RedeliverDeadLetters {Id* | All}                 -> RedeliverDeadLettersResponse
                                                         {Redelivered, Unknown*}
    PurgeDeadLetters {Id* | All | OlderThan}         -> PurgeDeadLettersResponse {Purged}

``Limit`` is 1 to :data:`~.outbox.MAX_DEAD_LETTER_LIST` (default 100); a message names at most
:data:`MAX_IDS` ids; ``All`` is ``true``; ``OlderThan`` is seconds (dead before now minus
that). Anything else is a Sender fault ``adm:InvalidRequest``. Times are xs:dateTime (UTC).
A redelivered dead letter goes back to the outbox with its attempts reset and its payload and
``wsa:MessageID`` unchanged; the target URL is judged again by the URL policy when it is sent.
"""
from __future__ import annotations

import datetime

from wsframework import ns
from wsframework.admin import (Contract, Integer32, Unicode, contracts, optional,
                               register_operation, repeated, required)
from wsframework.exceptions import sender_fault

from .outbox import MAX_DEAD_LETTER_LIST, Outbox

__all__ = ["ListDeadLetters", "ListDeadLettersResponse", "DeadLetterInfo",
           "RedeliverDeadLetters", "RedeliverDeadLettersResponse", "PurgeDeadLetters",
           "PurgeDeadLettersResponse", "OPERATIONS", "register_dead_letter_admin", "MAX_IDS"]

MAX_IDS = 1000  # ids one Redeliver/Purge message may name
_MAX_TEXT = 1000  # characters of a Topic / Subscription filter


class ListDeadLetters(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [
        ("Topic", optional(Unicode(max_len=_MAX_TEXT))),
        ("Subscription", optional(Unicode(max_len=_MAX_TEXT))),
        ("Limit", Integer32(nillable=False, ge=1, le=MAX_DEAD_LETTER_LIST)),
    ]


class DeadLetterInfo(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [
        ("Id", Integer32(min_occurs=1, nillable=False)),
        ("Subscription", required(Unicode)),
        ("Topic", Unicode(min_occurs=1, nillable=False)),
        ("Url", required(Unicode)),
        ("Reason", required(Unicode)),
        ("Attempts", Integer32(min_occurs=1, nillable=False)),
        ("FirstAttempt", optional(Unicode)),
        ("LastAttempt", optional(Unicode)),
        ("DeadAt", required(Unicode)),
        ("Size", Integer32(min_occurs=1, nillable=False)),
        ("MessageId", required(Unicode)),
    ]


class ListDeadLettersResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Total", Integer32(min_occurs=1, nillable=False)),
                  ("DeadLetter", repeated(DeadLetterInfo))]


class RedeliverDeadLetters(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Id", repeated(Integer32, ge=1)), ("All", optional(Unicode))]


class RedeliverDeadLettersResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Redelivered", Integer32(min_occurs=1, nillable=False)),
                  ("Unknown", repeated(Integer32))]


class PurgeDeadLetters(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Id", repeated(Integer32, ge=1)), ("All", optional(Unicode)),
                  ("OlderThan", Integer32(nillable=False, ge=0))]


class PurgeDeadLettersResponse(Contract):
    __namespace__ = ns.ADMIN
    _type_info = [("Purged", Integer32(min_occurs=1, nillable=False))]



OPERATIONS = (
    register_operation(ListDeadLetters, ListDeadLettersResponse),
    register_operation(RedeliverDeadLetters, RedeliverDeadLettersResponse),
    register_operation(PurgeDeadLetters, PurgeDeadLettersResponse),
)


def _invalid(reason: str):
    return sender_fault(reason, contracts.FAULT_INVALID_REQUEST)


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def _all(text: str | None) -> bool:
    if text is None:
        return False
    if text.strip() not in ("true", "1"):
        raise _invalid(f"All must be true (or absent), not {text[:40]!r}")
    return True


def _ids(ids) -> list[int]:
    ids = list(ids or ())
    if len(ids) > MAX_IDS:
        raise _invalid(f"at most {MAX_IDS} ids per message ({len(ids)} given)")
    return ids


def register_dead_letter_admin(admin, outbox: Outbox, *, after_redeliver=None) -> None:
    """Serve the three messages on ``admin`` for ``outbox``; ``after_redeliver()`` runs once
    rows went back to the outbox (the manager queues them at once instead of at its next
    sweep)."""

    def list_(request, message):
        letters = outbox.dead_letters(topic=request.Topic or None,
                                      subscription=request.Subscription or None,
                                      limit=request.Limit or 100)
        return ListDeadLettersResponse(Total=outbox.dead_letter_count(), DeadLetter=[
            DeadLetterInfo(Id=d.id, Subscription=d.subscription_id, Topic=d.topic, Url=d.url,
                           Reason=d.reason, Attempts=d.attempts,
                           FirstAttempt=_when(d.first_attempt), LastAttempt=_when(d.last_attempt),
                           DeadAt=_when(d.dead_at), Size=d.size, MessageId=d.message_id)
            for d in letters])

    def redeliver(request, message):
        ids = _ids(request.Id)
        every = _all(request.All)
        if every == bool(ids):
            raise _invalid("RedeliverDeadLetters needs Id elements or All, not both")
        moved = outbox.redeliver(None if every else ids)
        if moved and after_redeliver is not None:
            after_redeliver()
        found = set(moved)
        return RedeliverDeadLettersResponse(Redelivered=len(moved),
                                            Unknown=sorted({i for i in ids if i not in found}))

    def purge(request, message):
        ids = _ids(request.Id)
        every = _all(request.All)
        older = request.OlderThan
        if (bool(ids) + every + (older is not None)) != 1:
            raise _invalid("PurgeDeadLetters needs exactly one of Id elements, All, OlderThan")
        if ids:
            purged = outbox.purge(ids)
        elif every:
            purged = outbox.purge()
        else:
            purged = outbox.purge(older_than=outbox.clock() - older)
        return PurgeDeadLettersResponse(Purged=purged)

    admin.register(ListDeadLetters, list_)
    admin.register(RedeliverDeadLetters, redeliver)
    admin.register(PurgeDeadLetters, purge)
