"""The ``table`` role: the range-aggregate table service (:mod:`.table_service`) served by
``edn serve`` under gunicorn like every other role, with the same HTTP hardening (the body
limit ``--max-body``, slow and idle clients held by the worker's event loop, not by a thread,
idle keep-alive connections closed after ``--keepalive`` seconds, malformed HTTP answered
with a SOAP fault)::

    edn table feed-schema --value per --over risk --low 0 --high 100 > feed.xml
    edn topic create stocks-feed --schema feed.xml --at http://127.0.0.1:8080
    edn serve table --port 8090 --data ./table --dispatcher http://127.0.0.1:8080 \\
        --set table=stocks --set value=per --set over=risk --set low=0 --set high=100

Publishers then send ``ra:Put`` / ``ra:Delete`` to ``http://127.0.0.1:8090/topics/stocks``
and subscribers ``ra:Query`` there; the changes go to the feed topic (``TABLE-feed`` unless
``feed`` says otherwise) at the root dispatchers (``dispatcher``: repeat ``--dispatcher``, or
a comma-separated list, for failover).

One worker, by design. The table's MIN and MAX structures (ordered by ``x``, rebuilt from the
store at start) live in the worker's memory beside SQLite. Several workers would each need to
catch up from the store before every update and every query (a query answered from a stale
copy can give a subscriber a result older than its subscription, and it would then miss a
change), and the outbox would need a lock across processes to stay in order; what they would
buy is little: updates are serialized anyway (one SQLite writer, one update number), and one
gevent worker already holds thousands of connections. So ``edn serve table --workers 2`` is
refused before any process starts (:data:`build_table.single_worker`, read by ``edn serve``),
and the store's own lock (:class:`~.table_service.TableStore`) refuses a second process on
the same ``--data`` whatever started it.
"""
from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from matchers.range_aggregate import feed_schema
from matchers.schema import InvalidSchema
from route_manager.protocol import EVENT_BATCH_MOST, SERVICE_NAMES
from route_manager.publisher import Publisher
from wsframework.admission import DEFAULT_CONTROL_WAIT
from wsframework.service import Service, ServiceConfig
from wsframework.settings import Settings, parse_ip_ranges, parse_urls, setting

from .table_service import MAX_TUPLES, TableService, TableStore

log = logging.getLogger(__name__)

__all__ = ["TableSettings", "build_table", "add_table_parser", "STORE_FILE"]

STORE_FILE = "table.db"
# A table's name is a path segment (/topics/TABLE) and a topic name at the EDN.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# How long a new worker waits for the store's lock: its predecessor may still be exiting
# (gunicorn's graceful_timeout is 15 s); the arbiter's boot timeout (--timeout) is longer.
OWNER_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class TableSettings(Settings):
    table: str | None = setting(None, "the table's name: updates and queries go to "
                                "BASE/topics/TABLE (required)")
    value: str | None = setting(None, "the aggregate attribute y of the feed's schema (required)")
    over: str | None = setting(None, "the range attribute x of the feed's schema (required)")
    low: float | None = setting(None, "the range attribute's domain, lower edge (required)")
    high: float | None = setting(None, "the range attribute's domain, upper edge (required)")
    dispatcher: tuple[str, ...] = setting((), "the root dispatchers' base URLs the changes go "
                                          "to (required; --dispatcher repeated, or "
                                          "comma-separated; failover in that order)",
                                          parse=parse_urls)
    feed: str | None = setting(None, "the feed topic at the EDN (default: TABLE-feed)")
    max_tuples: int = setting(MAX_TUPLES, "tuples the table holds at most (publishers have no "
                              "credential); an insert beyond is a Sender fault")
    batch_max: int = setting(256, "changes per edn:EventBatch sent to the feed at most")
    retry_seconds: float = setting(0.5, "seconds between attempts to send what the outbox "
                                   "still holds")
    # edn serve passes --allow-private to every role; the table sends only to its dispatchers.
    allow_private: tuple[str, ...] = setting((), "unused by the table (it sends only to its "
                                             "dispatchers)", parse=parse_ip_ranges)

    def validate(self) -> None:
        missing = [key for key in ("table", "value", "over", "low", "high")
                   if getattr(self, key) is None]
        if missing:
            raise ValueError(f"the table role needs {', '.join(missing)} "
                             f"(--set {missing[0]}=...)")
        if not self.dispatcher:
            raise ValueError("the table role needs a root dispatcher's URL (--dispatcher URL)")
        for key in ("table", "feed"):
            name = getattr(self, key)
            if name is not None and not _NAME.fullmatch(name):
                raise ValueError(f"{key} is 1 to 100 letters, digits, '.', '_' or '-', not "
                                 f"{name!r}")
        if not (abs(self.low) < float("inf") and abs(self.high) < float("inf")
                and self.low < self.high):
            raise ValueError("the range domain needs finite low < high")
        if self.max_tuples < 1 or self.batch_max < 1 or not self.retry_seconds > 0:
            raise ValueError("max_tuples and batch_max must be >= 1, retry_seconds > 0")
        if self.batch_max > EVENT_BATCH_MOST:
            raise ValueError(f"batch_max must be at most {EVENT_BATCH_MOST} (what a receiver "
                             f"takes in one edn:EventBatch)")

    @property
    def feed_topic(self) -> str:
        return self.feed or f"{self.table}-feed"


def build_table(config: ServiceConfig, *, publisher=None,
                owner_wait: float = OWNER_WAIT_SECONDS) -> Service:
    """The ``table`` role (``publisher``: a stand-in for the root dispatchers, for tests)."""
    settings = TableSettings.from_mapping(config.settings)
    service = Service(config, topic_admin=False, names=SERVICE_NAMES)
    # no control gate: the table's requests are its updates, taken in order in one process
    service.gate.configure(0, 1.0, DEFAULT_CONTROL_WAIT)
    table = None
    try:
        table = TableStore(Path(config.data_dir) / STORE_FILE, settings.table, settings.value,
                           settings.over, settings.low, settings.high,
                           max_tuples=settings.max_tuples, owner_wait=owner_wait)
        TableService(service, table, publisher or Publisher(settings.dispatcher),
                     settings.feed_topic, batch_max=settings.batch_max,
                     retry_seconds=settings.retry_seconds)
        from ..metrics import serve_table_metrics
        serve_table_metrics(service, table)  # Prometheus: {base}/metrics
    except BaseException:
        service.close()
        if table is not None:
            table.close()   # idempotent: the TableService may have closed it already
        raise
    log.info("table %s (%d tuples, seq %d) at %s/topics/%s, changes to %s", settings.table,
             len(table), table.seq, service.base_url, settings.table, settings.feed_topic)
    return service


build_table.settings = (TableSettings,)
# Read by ``edn serve``: this role refuses --workers above 1 (the module docstring says why).
build_table.single_worker = ("the table's ordered structures live in one process's memory "
                             "beside its store")


def add_table_parser(sub) -> None:
    """``edn table ...`` (the ``edn.commands`` entry point)."""
    p = sub.add_parser("table", help="range-aggregate tables (edn serve table serves one)",
                       description=__doc__.split("\n\n")[0])
    tsub = p.add_subparsers(dest="table_command", required=True)
    s = tsub.add_parser("feed-schema", help="print the edn:Schema a table's feed topic is "
                                            "created with (edn topic create T-feed --schema FILE)")
    s.add_argument("--value", required=True, help="the aggregate attribute (y)")
    s.add_argument("--over", required=True, help="the range attribute (x)")
    s.add_argument("--low", type=float, required=True, help="the range attribute's domain")
    s.add_argument("--high", type=float, required=True)
    s.set_defaults(func=cmd_feed_schema)


def cmd_feed_schema(args) -> int:
    try:
        schema = feed_schema(args.value, args.over, args.low, args.high).to_element()
    except InvalidSchema as exc:   # an empty or infinite domain, a bad attribute name
        print(f"edn table feed-schema: {exc}", file=sys.stderr)
        return 4
    print(etree.tostring(schema, pretty_print=True).decode(), end="")
    return 0
