"""Profile inputs read from a running network through its admin messages, so the Spark
driver needs no shared disk: the servers' subscriptions (``edn profile --from-network``) and
the events the dispatcher routes (``edn record``).

**Subscriptions.** ``ListServers`` at the dispatcher names the subscription servers; each
answers ``ExportBoxes`` pages (:mod:`subscription_manager.server.box_export`): the
rectangles of the topic's active subscriptions as its engine compiles them, with the
topic's schema. Pages go by subscription id; a cursor that does not move forward, a schema
that differs between servers, a rectangle of the wrong width or a number that is not finite
refuses the whole input. At most ``max_boxes`` rectangles are read in all.

**Events.** ``edn record`` arms a recording at the dispatcher (Configure ``record``,
:mod:`route_manager.dispatcher.recording`), waits until it holds the events asked for (or
the timeout), reads them with ``GetRecording`` pages, stops it, and writes a Parquet file:
the time each event was routed (``at``), its XML (``event``) and one column per schema
attribute with its coordinate, as the servers' engines read it. The file's metadata names
the coordinate columns (``edn.coordinates``), the topic and the schema, so
``edn profile --events-file trace.parquet`` takes the points back.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable

import numpy as np
from lxml import etree

from matchers.schema import Schema
from matchers.schema.extraction import standalone
from matchers.vocabulary import EDN
from route_manager import protocol

__all__ = ["from_network", "read_boxes_page", "record_events", "read_recording_page",
           "write_trace", "read_trace", "InvalidNetworkInput", "MAX_BOXES", "TRACE_FILE"]

MAX_BOXES = 5_000_000  # rectangles read in all (about 1.3 GB of coordinates at d = 16)
BOXES_PAGE = 2_000     # subscriptions asked for per ExportBoxes
RECORDING_PAGE = 1_000  # events asked for per GetRecording
MAX_BOXES_PER_PAGE = 64 * protocol.MAX_PAGE  # a filter may compile to several rectangles
MAX_DIMENSIONS = 64
MAX_PAGES = 100_000    # ExportBoxes pages read in all
TRACE_FILE = "events.parquet"
_SCHEMA_TAG = f"{{{EDN}}}Schema"


class InvalidNetworkInput(ValueError):
    """What a server or the dispatcher answered cannot be a profile's input."""


# -- subscriptions -----------------------------------------------------------------------------

def read_boxes_page(element, topic: str, after: str) -> tuple[Schema, np.ndarray, np.ndarray,
                                                               str | None, int]:
    """(schema, mins, maxs, next cursor or None, unusable filters) of one ``edn:Boxes``."""
    if getattr(element, "tag", None) != protocol.BOXES:
        raise InvalidNetworkInput("ExportBoxes answered something else than edn:Boxes")
    if element.get("topic") != topic:
        raise InvalidNetworkInput(f"ExportBoxes answered topic {element.get('topic')!r}")
    children = [child for child in element if isinstance(child.tag, str)]
    if not children or children[0].tag != _SCHEMA_TAG:
        raise InvalidNetworkInput("edn:Boxes without its edn:Schema first")
    schema = _schema(children[0])
    boxes = children[1:]
    if len(boxes) > MAX_BOXES_PER_PAGE:
        raise InvalidNetworkInput(f"more than {MAX_BOXES_PER_PAGE:,} rectangles in one page")
    mins = np.empty((len(boxes), schema.d))
    maxs = np.empty((len(boxes), schema.d))
    for k, box in enumerate(boxes):
        if box.tag != protocol.BOX:
            raise InvalidNetworkInput(f"unexpected {box.tag!r} in edn:Boxes")
        mins[k] = _coordinates(box.get("lo"), schema.d)
        maxs[k] = _coordinates(box.get("hi"), schema.d)
    if len(boxes) and not np.all(mins <= maxs):
        raise InvalidNetworkInput("a rectangle whose lo exceeds its hi")
    cursor = element.get("next")
    if cursor is not None and (len(cursor) > protocol.CURSOR_LENGTH or cursor <= after):
        raise InvalidNetworkInput("ExportBoxes answered a cursor that does not move forward")
    return schema, mins, maxs, cursor, _count(element.get("unusable", "0"))


def _schema(element) -> Schema:
    try:
        schema = Schema.from_element(element)
    except Exception as exc:
        raise InvalidNetworkInput(f"unusable edn:Schema: {exc}") from None
    if not 0 < schema.d <= MAX_DIMENSIONS:
        raise InvalidNetworkInput(f"a schema of 1 to {MAX_DIMENSIONS} attributes is needed "
                                  "to profile a topic")
    return schema


def _coordinates(text: str | None, d: int) -> np.ndarray:
    parts = (text or "").split()
    if len(parts) != d or any(len(p) > 40 for p in parts):
        raise InvalidNetworkInput(f"a rectangle corner of {len(parts)} numbers, not {d}")
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise InvalidNetworkInput("a rectangle corner that is not numbers") from None
    if not np.all(np.isfinite(values)):
        raise InvalidNetworkInput("a rectangle corner that is not finite")
    return values


def _count(text: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise InvalidNetworkInput(f"not a count: {text[:20]!r}")
    return int(text)


def from_network(dispatcher: str, topic: str, client_for: Callable[[str], object], *,
                 events_array: np.ndarray | None = None, events: int = 10_000,
                 event_kind: str = "uniform", seed: int = 2, max_boxes: int = MAX_BOXES,
                 progress: Callable[[str], None] = lambda text: None):
    """:class:`~.inputs.ProfileInputs` of ``topic`` on every subscription server registered
    at ``dispatcher``; ``client_for(address)`` is an admin client with the credential."""
    from .inputs import ProfileInputs, events_from_spec

    servers = client_for(dispatcher).call(protocol.ListServers()).Server or []
    if not servers:
        raise InvalidNetworkInput(f"no subscription server is registered at {dispatcher}")
    schema = None
    names, rectangles = [], []
    total = unusable = pages = 0
    for info in sorted(servers, key=lambda s: s.Name):
        client = client_for(info.Address)
        after, mins, maxs = "", [], []
        while True:
            pages += 1
            if pages > MAX_PAGES:  # empty pages with cursors that move on forever
                raise InvalidNetworkInput(f"more than {MAX_PAGES:,} pages of rectangles")
            page = client.call(protocol.ExportBoxes(Topic=topic, After=after or None,
                                                    Max=BOXES_PAGE)).Boxes
            this, lo, hi, cursor, skipped = read_boxes_page(page, topic, after)
            if schema is None:
                schema = this
            elif this != schema:
                raise InvalidNetworkInput(f"{info.Name}: topic {topic!r} has another schema "
                                          "than the first server's")
            total += len(lo)
            unusable += skipped
            if total > max_boxes:
                raise InvalidNetworkInput(f"more than {max_boxes:,} rectangles: profile a "
                                          "sample of the servers, or raise --max-boxes")
            mins.append(lo)
            maxs.append(hi)
            if cursor is None:
                break
            after = cursor
        names.append(info.Name)
        rectangles.append((np.vstack(mins), np.vstack(maxs)))
        progress(f"{info.Name}: {len(rectangles[-1][0]):,} rectangles")
    if events_array is None:
        unit = events_from_spec(event_kind, events, schema.d, seed=seed, low=0.0, high=1.0)
        events_array = schema.domain_lo + unit * (schema.domain_hi - schema.domain_lo)
    elif events_array.shape[1] != schema.d:
        raise InvalidNetworkInput(f"the events have {events_array.shape[1]} coordinates, the "
                                  f"topic's schema {schema.d}")
    source = {"kind": "network", "dispatcher": dispatcher, "topic": topic,
              "servers": len(names), "unusable_filters": unusable}
    return ProfileInputs(tuple(names), tuple(rectangles), events_array,
                         etree.tostring(schema.to_element()), source)


# -- events ------------------------------------------------------------------------------------

def read_recording_page(element, recording: str) -> tuple[Schema | None, list, str | None]:
    """(schema, [(time, event element)], next cursor or None) of one ``edn:Recording``."""
    if getattr(element, "tag", None) != protocol.RECORDING:
        raise InvalidNetworkInput("GetRecording answered something else than edn:Recording")
    if element.get("id") != recording:
        raise InvalidNetworkInput("the recording was replaced by another one meanwhile")
    schema, rows = None, []
    for child in element:
        if not isinstance(child.tag, str):
            continue
        if child.tag == _SCHEMA_TAG and schema is None and not rows:
            schema = _schema(child)
        elif child.tag == protocol.RECORDED:
            at = _finite(child.get("at"))
            events = [e for e in child if isinstance(e.tag, str)]
            if len(events) != 1:
                raise InvalidNetworkInput("an edn:Recorded holds one event")
            # its own document, as the dispatcher routed it: a schema's absolute paths
            # start at the event, not at the envelope that carried the page
            rows.append((at, standalone(events[0])))
        else:
            raise InvalidNetworkInput(f"unexpected {child.tag!r} in edn:Recording")
    if len(rows) > protocol.MAX_PAGE:
        raise InvalidNetworkInput("more events in one page than asked for")
    cursor = element.get("next")
    if cursor is not None and len(cursor) > protocol.CURSOR_LENGTH:
        raise InvalidNetworkInput("an overlong cursor")
    return schema, rows, cursor


def _finite(text: str | None) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise InvalidNetworkInput("a time that is no number") from None
    if not math.isfinite(value) or len(text) > 40:
        raise InvalidNetworkInput("a time that is not finite")
    return value


def record_events(client, topic: str, events: int, *, every: int = 1, timeout: float = 600.0,
                  poll: float = 0.5, progress: Callable[[str], None] = lambda text: None,
                  clock=time.monotonic, sleep=time.sleep) -> tuple[Schema, list]:
    """Arm a recording of ``events`` events of ``topic`` at the dispatcher ``client`` talks
    to, wait for them (at most ``timeout`` seconds), read them and stop it: the topic's
    schema and the rows (time, event element), at most ``events``."""
    from wsframework.admin import contracts

    answer = client.call(contracts.Configure(Setting=[contracts.Figure(
        Name="record", Value=f"topic={topic},events={events},every={every}")]))
    try:
        setting = {f.Name: f.Value for f in answer.Setting or []}.get("record", "")
        recording = dict(p.split("=", 1) for p in setting.split(",") if "=" in p).get("id")
        if not recording:
            raise InvalidNetworkInput(f"the dispatcher did not start the recording "
                                      f"({setting[:200]!r})")
        deadline = clock() + timeout
        stored = 0
        while True:
            figures = {f.Name: f.Value for f in client.call(
                contracts.GetStats(Prefix="record.")).Figure or []}
            if figures.get("record.id") != recording:
                raise InvalidNetworkInput("the recording was replaced by another one meanwhile")
            stored = _count(figures.get("record.stored", "0"))
            # done: the count reached, the time up, or the recording stopped (its byte cap,
            # or a store that failed)
            if stored >= events or clock() >= deadline or figures.get("record.on") == "0":
                break
            progress(f"{stored:,} of {events:,} events recorded")
            sleep(poll)
        progress(f"{stored:,} events recorded; reading them")
        schema, rows, after = None, [], None
        while len(rows) < events:
            page = client.call(protocol.GetRecording(After=after, Max=min(
                RECORDING_PAGE, events - len(rows)))).Recording
            this, got, after = read_recording_page(page, recording)
            schema = schema or this
            rows += got
            if after is None or not got:
                break
    finally:
        client.call(contracts.Configure(Setting=[contracts.Figure(Name="record", Value="off")]))
    if schema is None:
        raise InvalidNetworkInput(f"topic {topic!r} has no event schema: nothing to profile")
    return schema, rows[:events]


def write_trace(path: Path, schema: Schema, topic: str, rows: list) -> int:
    """``rows`` (time, event element) as a Parquet file at ``path``; how many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [a.name for a in schema.attributes]
    points = np.array([schema.point(event) for _, event in rows]).reshape(len(rows), schema.d)
    columns = {"at": pa.array([at for at, _ in rows], pa.float64()),
               "event": pa.array([etree.tostring(event, encoding="unicode") for _, event in rows],
                                 pa.string())}
    coordinates = []
    for k, name in enumerate(names):
        column = name if name not in columns else f"coordinate.{name}"
        columns[column] = pa.array(points[:, k], pa.float64())
        coordinates.append(column)
    metadata = {b"edn.coordinates": json.dumps(coordinates).encode(),
                b"edn.topic": topic.encode(),
                b"edn.schema": etree.tostring(schema.to_element())}
    table = pa.table(columns).replace_schema_metadata(metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return len(rows)


def read_trace(path: str | Path) -> np.ndarray:
    """The points of a trace :func:`write_trace` wrote (the columns its metadata names)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    metadata = table.schema.metadata or {}
    try:
        coordinates = json.loads(metadata[b"edn.coordinates"])
    except (KeyError, ValueError):
        raise ValueError(f"{path}: not a trace of edn record (no edn.coordinates)") from None
    if not isinstance(coordinates, list) or not all(c in table.column_names
                                                    for c in coordinates):
        raise ValueError(f"{path}: its edn.coordinates name columns it does not have")
    return np.column_stack([table.column(c).to_numpy() for c in coordinates]).astype(np.float64)
