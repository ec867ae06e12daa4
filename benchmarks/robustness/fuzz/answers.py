"""What the fuzz makes of an answer: its outcome (:func:`classify`), whether an HTTP 500 is
one the SOAP bindings prescribe (:func:`spec_500`), and the :class:`Tally` of outcomes,
fault reasons and reproducers per process."""
from __future__ import annotations

import threading
from collections import Counter

OUTCOMES = ("2xx", "sender_fault", "receiver_fault", "bare_4xx", "html", "other", "no_answer",
            "connection_error", "timeout")
BAD_OUTCOMES = ("html", "other", "timeout", "connection_error")
_EXAMPLES_PER_KIND = 5


def _fault(body: bytes):
    """(SOAP version, fault) of an answer that is a SOAP fault envelope, else None."""
    from wsframework.soap import parse_envelope
    from wsframework.xmlparse import ParserLimits
    if not body:
        return None
    try:
        envelope = parse_envelope(body, ParserLimits(max_bytes=max(len(body), 1)))
    except Exception:
        return None
    fault = envelope.fault()
    return None if fault is None else (envelope.version, fault)


def classify(status: int, content_type: str | None, body: bytes) -> str:
    """The outcome of one answer: see the module's docstring."""
    from wsframework.exceptions import RECEIVER
    lowered = body[:4096].lower()
    if b"<html" in lowered or b"<!doctype html" in lowered or "html" in (content_type or "").lower():
        return "html"
    if 200 <= status < 300:
        return "2xx"
    found = _fault(body)
    if found is not None:
        return "receiver_fault" if found[1].code == RECEIVER else "sender_fault"
    if 400 <= status < 500:
        return "bare_4xx"
    return "other"


_SPEC_RECEIVER_NAMESPACES = ("http://schemas.xmlsoap.org/ws/2004/08/eventing",
                             "http://www.w3.org/2011/03/ws-evt",
                             "http://www.w3.org/2005/08/addressing",
                             "http://schemas.xmlsoap.org/ws/2004/08/addressing")


def spec_500(body: bytes) -> bool:
    """Whether an HTTP 500 answer is one the SOAP bindings prescribe: every SOAP 1.1 fault
    but a bare ``soap:Server`` (SOAP 1.1 HTTP binding, section 6.2), a SOAP 1.2
    VersionMismatch, MustUnderstand or DataEncodingUnknown (SOAP 1.2 part 2, table 20), or a
    Receiver fault the WS-Eventing or WS-Addressing specs define (``wse:UnableToRenew``...).
    Anything else (no SOAP, a generic Receiver fault, a SOAP 1.2 Sender fault) at 500 is the
    service failing on its input."""
    from wsframework.exceptions import RECEIVER, SENDER
    from wsframework.soap import SoapVersion
    found = _fault(body)
    if found is None:
        return False
    version, fault = found
    spec_subcode = any(s.startswith(tuple("{%s}" % n for n in _SPEC_RECEIVER_NAMESPACES))
                       for s in fault.subcodes)
    if fault.code == RECEIVER:
        return spec_subcode
    if fault.code == SENDER:
        return version is SoapVersion.SOAP11
    return True  # VersionMismatch, MustUnderstand, DataEncodingUnknown


def parse_raw_answer(data: bytes) -> tuple[int, str | None, bytes] | None:
    """Status, content type and body of the first HTTP response in ``data`` (None: none)."""
    while data.startswith(b"HTTP/1.1 1"):  # 100 Continue: the answer follows
        data = data.partition(b"\r\n\r\n")[2]
    if not data:
        return None
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0, None, data
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().decode("latin-1")
    length = headers.get(b"content-length")
    body = rest[:int(length)] if length and length.isdigit() else rest
    return status, headers.get(b"content-type"), body


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts: dict[str, Counter] = {}
        self.examples: dict[str, list] = {}
        self.subscribed: Counter = Counter()
        self.sent: Counter = Counter()
        self.fault_reasons: Counter = Counter()

    def add(self, target: str, outcome: str, *, malformed: bool, status: int | None,
            request: bytes, mutation: str, answer: bytes = b"", subscribed: bool = False,
            index: int | None = None):
        with self.lock:
            counts = self.counts.setdefault(target, Counter())
            counts[outcome] += 1
            self.sent[target] += 1
            if subscribed:
                self.subscribed[target] += 1
            bad = outcome in BAD_OUTCOMES
            if outcome == "receiver_fault":
                self.fault_reasons[_reason(answer)] += 1
            if status == 500 and malformed:
                if spec_500(_answer_body(answer)):
                    counts["http_500_by_spec"] += 1
                else:
                    counts["http_500_malformed"] += 1
                    bad = True
            if bad or (outcome == "no_answer" and len(self.examples.get(
                    f"{target}:no_answer", ())) < 2):
                key = f"{target}:{outcome}" + (f":{status}" if status else "")
                kept = self.examples.setdefault(key, [])
                if len(kept) < _EXAMPLES_PER_KIND:
                    kept.append({"message": index, "mutation": mutation, "request": _shown(request),
                                 "answer": _shown(answer)})


def _reason(answer: bytes) -> str:
    """The fault's subcode and reason, shortened, of an answer as :class:`Tally` keeps it
    (``STATUS CONTENT-TYPE\\nBODY``, or the raw bytes of a raw-socket exchange)."""
    found = _fault(_answer_body(answer))
    if found is None:
        return "?"
    fault = found[1]
    subcode = (fault.subcode or "").rsplit("}", 1)[-1]
    return f"{fault.code}{'/' + subcode if subcode else ''}: {fault.reason[:60]}"


def _answer_body(answer: bytes) -> bytes:
    if answer[:1].isdigit():
        return answer.partition(b"\n")[2]
    return (parse_raw_answer(answer) or (0, None, b""))[2]


def _shown(data: bytes, limit: int = 1200) -> str:
    text = data[:limit].decode("latin-1")
    return text + (f"... ({len(data)} bytes)" if len(data) > limit else "")
