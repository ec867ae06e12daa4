"""``edn subscribe --from-file FILE``: an operator's bulk subscribe (migrating an existing
population), sent as ``SubscribeMany`` admin messages (:mod:`subscription_manager.bulk_subscribe`)
of ``--chunk`` requests each to the source or server at ``--at``; with ``--place`` an EDN
server places each request on the server a Subscribe would go to.

FILE (``-``: standard input) holds one JSON object per line::

    {"notify_to": "http://sink/1", "filter": "x in [1, 2]", "dialect": "ranges",
     "expires": "PT1H", "end_to": "http://sink/end", "prefixes": {"q": "urn:quotes"}}

``notify_to`` is required; ``dialect``, ``expires`` and ``prefixes`` default to the command's
``--dialect``, ``--expires`` and ``--prefix`` options (no filter, no EndTo). One JSON line per input line is written
to ``--out`` (default standard output): ``{"line": N, "id": ..., "expires": ...}`` for a
subscription made (with ``"manager": URL`` when another server holds it),
``{"line": N, "refused": CODE, "reason": ...}`` for one refused (by the
service, with the fault a Subscribe would get, or here for a line that is no such object).
The exit status is 0 when every line was made, 1 when some were refused.
"""
from __future__ import annotations

import json
import sys
from typing import Iterator

__all__ = ["run_bulk_subscribe", "DEFAULT_CHUNK", "BULK_TIMEOUT", "BadLine"]

#: requests per SubscribeMany message (the service takes at most MAX_BULK_SUBSCRIBES)
DEFAULT_CHUNK = 5000
#: seconds to wait for a chunk's answer: a server holding many subscriptions already takes
#: far longer than an admin call's usual 10 s to make 5,000 more
BULK_TIMEOUT = 600.0
_KEYS = {"notify_to", "end_to", "filter", "dialect", "expires", "prefixes"}


class BadLine(ValueError):
    """An input line that is no subscription request."""


def _request(line: str, defaults: dict) -> dict:
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise BadLine(f"not JSON: {exc}") from None
    if not isinstance(item, dict):
        raise BadLine("not a JSON object")
    unknown = sorted(set(item) - _KEYS)
    if unknown:
        raise BadLine(f"unknown keys {unknown} (known: {sorted(_KEYS)})")
    if not isinstance(item.get("notify_to"), str) or not item["notify_to"]:
        raise BadLine("notify_to (a URL) is required")
    for key in ("end_to", "filter", "dialect", "expires"):
        if item.get(key) is not None and not isinstance(item[key], str):
            raise BadLine(f"{key} is a string")
    prefixes = item.get("prefixes", defaults["prefixes"])
    if not isinstance(prefixes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in prefixes.items()):
        raise BadLine("prefixes maps prefixes to namespace URIs")
    return {**defaults, **item, "prefixes": prefixes}


def _lines(path: str) -> Iterator[tuple[int, str]]:
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    try:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                yield number, line
    finally:
        if stream is not sys.stdin:
            stream.close()


def _chunks(path: str, size: int) -> Iterator[list[tuple[int, str]]]:
    chunk: list[tuple[int, str]] = []
    for numbered in _lines(path):
        chunk.append(numbered)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_bulk_subscribe(args, client, *, dialect: str | None, namespaces: dict) -> int:
    """Send the requests of ``args.from_file`` with the admin ``client``; returns the exit
    status."""
    from subscription_manager.bulk_subscribe import (MAX_BULK_SUBSCRIBES, SubscribeMany,
                                                     parse_results, requests_element)
    from subscription_manager.client import subscribe_body
    from subscription_manager.operations import Made
    if not 1 <= args.chunk <= MAX_BULK_SUBSCRIBES:
        raise SystemExit(f"--chunk is 1 to {MAX_BULK_SUBSCRIBES}")
    defaults = {"dialect": dialect, "expires": args.expires, "prefixes": namespaces,
                "filter": None, "end_to": None}
    out = sys.stdout if args.out in (None, "-") else open(args.out, "w", encoding="utf-8")
    made = refused = 0
    try:
        for chunk in _chunks(args.from_file, args.chunk):
            results: dict[int, dict] = {}  # line number -> its result, written in line order
            sent, bodies = [], []
            for number, line in chunk:
                try:
                    item = _request(line, defaults)
                except BadLine as bad:
                    results[number] = {"refused": "BadLine", "reason": str(bad)}
                    continue
                bodies.append(subscribe_body(
                    args.version, item["notify_to"], end_to=item["end_to"],
                    filter=item["filter"], dialect=item["dialect"],
                    namespaces=item["prefixes"], expires=item["expires"]))
                sent.append(number)
            if bodies:
                response = client.call(SubscribeMany(
                    Topic=args.topic, Requests=requests_element(args.version, bodies),
                    Place=True if getattr(args, "place", False) else None))
                answers = parse_results(response.Results)
                if len(answers) != len(sent):
                    raise SystemExit(f"edn subscribe: the service answered {len(answers)} of "
                                     f"{len(sent)} requests; see --out for those before")
                for number, answer in zip(sent, answers):
                    results[number] = (_made(answer) if isinstance(answer, Made) else
                                       {"refused": answer.code, "reason": answer.reason})
            for number in sorted(results):
                made += "id" in results[number]
                refused += "id" not in results[number]
                out.write(json.dumps({"line": number, **results[number]}) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"edn subscribe: {made} subscriptions made, {refused} refused", file=sys.stderr)
    return 0 if refused == 0 else 1


def _made(answer) -> dict:
    result = {"id": answer.id, "expires": answer.expires}
    if answer.manager is not None:
        result["manager"] = answer.manager
    return result
