"""Hostile input against every role on real processes: ``edn bench fuzz [--quick] [--json]``.

A source, a dispatcher and subscription servers (``edn serve``, gunicorn) are started on
loopback with the product's launcher (:mod:`edn.localnet`), plus a notification sink. A valid
session is then recorded against them (Subscribe in every filter dialect and both WS-Eventing
versions, Renew, GetStatus, Unsubscribe, Publish, event batches, admin and EDN-wire messages);
those recorded messages seed the fuzz. Then ``messages`` fuzzed messages are sent, spread over the
roles, until they are all sent or ``deadline_s`` has passed:

* XML-aware mutations of a seed (hostile text or attributes in a random element, elements
  removed, duplicated, renamed or nested thousands deep, a wrong admin token);
* byte mutations (flips, cuts, splices, DOCTYPEs with entities, control characters);
* wrong HTTP metadata on a valid seed (content type, SOAPAction, path);
* garbage bodies;
* malformed HTTP framing over raw sockets: bad chunk sizes, duplicate or contradictory
  Content-Length, oversized headers, garbage request lines, a body cut short.

Every answer is classified (:func:`classify`): ``2xx``, a SOAP ``sender_fault`` or
``receiver_fault`` (the most frequent Receiver faults by subcode and reason are listed), a ``bare_4xx`` (no SOAP, no HTML), ``html`` (an HTML body: must stay 0),
``other`` (anything else), ``no_answer`` (the server closed a raw connection without a
word), ``connection_error`` and ``timeout``. ``http_500_malformed`` counts HTTP 500 answers to
a fuzzed message that the SOAP bindings do not prescribe (must stay 0: see :func:`spec_500`);
``http_500_by_spec`` the others (every SOAP 1.1 fault, VersionMismatch, the specs' Receiver
faults such as ``wse:UnableToRenew``). Per process: those counts, whether it is alive and still
answering ``/health`` and a valid request at the end, its RSS (gunicorn master and workers,
from ``/proc``) before and after, worker processes replaced meanwhile, and the subscriptions
the fuzz created; ``memory_bounded`` says whether its RSS grew by at most what those
subscriptions cost plus 50 MB (:func:`~.harness.memory_bound`), and the top-level
``memory_bounded`` whether every process's did. The first few requests of every bad outcome
are kept (``examples``) as reproducers.

Message ``i`` is drawn from ``random.Random(seed * 1_000_003 + i)``: with the same seeds, a
run is repeatable message by message (the recorded message IDs differ between runs).
"""
from __future__ import annotations

from .answers import BAD_OUTCOMES, OUTCOMES, Tally, classify, parse_raw_answer, spec_500
from .harness import measure, run
from .mutations import hostile_values, mutate, raw_request
from .session import TOKEN, Message, Recorder, quote_event, record_seeds

__all__ = ["BAD_OUTCOMES", "OUTCOMES", "TOKEN", "Message", "Recorder", "Tally", "classify",
           "hostile_values", "measure", "mutate", "parse_raw_answer", "quote_event",
           "raw_request", "record_seeds", "run", "spec_500"]
