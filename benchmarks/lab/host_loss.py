"""The loss of the database's host, in the lab: nothing acknowledged may be lost.

Four hosts: ``db1`` runs the PostgreSQL primary, ``db2`` its synchronous standby (a base
backup of the primary, streaming, named in ``synchronous_standby_names``: a commit returns
only once the standby has it), ``app`` a source role whose store names both database hosts
(libpq tries them in order and takes the one that accepts writes), ``client`` a notification
sink, the subscribers and a publisher.

Under Subscribes and publications, ``db1`` is cut off from every host and its PostgreSQL is
killed (``pg_ctl stop -m immediate``: no shutdown checkpoint, nothing flushed that was not);
``db2`` is promoted. The role's connections to ``db1`` fail, the requests in flight are
answered with a fault (not acknowledged), and the role's next connections reach ``db2``.
Afterwards every acknowledged subscription must be there, and every acknowledged event must
have reached every subscription acknowledged before it was published (duplicates counted,
not failures).
"""
from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field

import psycopg
import requests

from benchmarks.lab.hosts import Lab
from benchmarks.postgres_cluster import PostgresCluster, run_checked
from wsframework.admin import AdminClient
from wsframework.addressing import WsaVersion, request_headers
from wsframework.publisher import PUBLISH_ACTION
from wsframework.soap import SoapVersion, build_envelope

__all__ = ["HostLossResult", "run_host_loss"]

_PORT = 5432
_STANDBY = "standby_db2"


@dataclass
class HostLossResult:
    subscriptions_acknowledged: int = 0
    subscriptions_lost: int = 0
    events_acknowledged: int = 0
    events_refused: int = 0  # answered with a fault or not answered: not acknowledged
    notifications_expected: int = 0
    notifications_lost: int = 0
    duplicates: int = 0
    cut_to_promoted_s: float = 0.0
    cut_to_first_ack_s: float | None = None  # the first acknowledgement after the cut
    lost_examples: list = field(default_factory=list)

    def figures(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "lost_examples"} | {
            "lost_examples": self.lost_examples[:5]}


class _Load:
    """Subscribes and publications from the client host, each recorded only once it is
    acknowledged (with its acknowledgement's time)."""

    def __init__(self, topic: str, sink_url: str):
        self.topic = topic
        self.sink_url = sink_url
        self.subscriptions: list[tuple[str, float, float]] = []  # (path, sent, acked)
        self.events: list[tuple[int, float, float]] = []  # (number, sent, acked)
        self.refused = 0
        self.stop = threading.Event()
        self._next = 0

    def subscribe(self, k: int) -> None:
        from subscription_manager.client import EventingClient
        path = f"/s{k}"
        sent = time.time()
        try:
            EventingClient("2011").subscribe(self.topic, self.sink_url + path, expires="PT2H")
        except Exception:
            self.refused += 1
            return
        self.subscriptions.append((path, sent, time.time()))

    def publish_one(self) -> None:
        number = self._next
        self._next += 1
        body = f'<q:quote xmlns:q="urn:q"><q:n>{number}</q:n></q:quote>'.encode()
        from lxml import etree
        envelope = build_envelope(SoapVersion.SOAP12, etree.fromstring(body),
                                  request_headers(WsaVersion.WSA10, self.topic, PUBLISH_ACTION))
        sent = time.time()
        try:
            answer = requests.post(self.topic, data=envelope, timeout=10,
                                   headers={"Content-Type": "application/soap+xml"})
        except requests.RequestException:
            self.refused += 1
            return
        if answer.status_code == 202:
            self.events.append((number, sent, time.time()))
        else:
            self.refused += 1

    def run(self, rate: float, subscribe_every: int) -> None:
        period = 1.0 / rate
        k = 10_000
        while not self.stop.is_set():
            started = time.monotonic()
            self.publish_one()
            if self._next % subscribe_every == 0:
                self.subscribe(k)
                k += 1
            self.stop.wait(max(0.0, period - (time.monotonic() - started)))


def _cluster(lab: Lab, host: str, root, settings: dict) -> PostgresCluster:
    address = lab[host].address
    return PostgresCluster(root, port=_PORT, listen=address, settings=settings,
                           runner=["ip", "netns", "exec", lab[host].netns])


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command]


def run_host_loss(*, subscriptions: int = 40, rate: float = 20.0, before_s: float = 4.0,
                  after_s: float = 4.0, drain_timeout: float = 60.0,
                  log=print) -> HostLossResult:
    result = HostLossResult()
    with Lab(["db1", "db2", "app", "client"]) as lab:
        os.chmod(lab.data_dir, 0o711)  # the clusters below it run as the postgres user
        primary = _cluster(lab, "db1", lab.data_dir / "db1", {
            "wal_level": "replica", "max_wal_senders": "4", "wal_keep_size": "256MB"})
        primary.init().start()
        primary.psql('CREATE DATABASE "edn"')
        standby = _cluster(lab, "db2", lab.data_dir / "db2", {})
        standby.root.mkdir(parents=True, exist_ok=True)
        standby.own_directory()
        run_checked(["ip", "netns", "exec", lab["db2"].netns, *_as_postgres(
            [str(standby.bin / "pg_basebackup"), "-h", lab["db1"].address, "-p", str(_PORT),
             "-U", "postgres", "-D", str(standby.data), "-R", "-X", "stream"])])
        standby.configure({
            "primary_conninfo": f"'host={lab['db1'].address} port={_PORT} user=postgres "
                                f"application_name={_STANDBY}'",
            "listen_addresses": f"'{lab['db2'].address}'",
            # promoted, it has no standby of its own: waiting for one would stop every commit
            "synchronous_standby_names": "''",
            "unix_socket_directories": f"'{standby.socket_dir}'"})
        standby.start()
        # synchronous from now on: a commit returns once the standby has it
        primary.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{_STANDBY}'")
        primary.psql("SELECT pg_reload_conf()")
        _wait(lambda: primary.psql("SELECT sync_state FROM pg_stat_replication").strip()
              == "sync", 30, "the standby to be synchronous")
        log("primary on db1, synchronous standby on db2")

        store = (f"postgresql://postgres@{lab['db1'].address}:{_PORT},"
                 f"{lab['db2'].address}:{_PORT}/edn?target_session_attrs=read-write"
                 "&connect_timeout=2")
        source = lab.serve("app", "source", "--store", store, "--store-schema", "source",
                           "--allow-private", str(lab.subnet), "--access", "open")
        client = lab["client"]
        client.run(lambda: AdminClient(source.base_url, source.admin_token).create_topic("stocks"))
        topic = f"{source.base_url}/topics/stocks"
        sink = lab.sink("client")
        load = _Load(topic, sink.url)
        for k in range(subscriptions):
            client.run(load.subscribe, k)
        thread = client.start_thread(load.run, rate, 10, name="host-loss-load")
        time.sleep(before_s)  # load before the cut (a measured stretch, not a wait for a state)

        cut = time.time()
        lab.isolate("db1")
        primary.stop("immediate")
        log("db1 cut off and its PostgreSQL killed")
        run_checked(["ip", "netns", "exec", lab["db2"].netns, *_as_postgres(
            [str(standby.bin / "pg_ctl"), "-D", str(standby.data), "-w", "promote"])])
        result.cut_to_promoted_s = round(time.time() - cut, 3)
        log(f"db2 promoted {result.cut_to_promoted_s} s after the cut")
        _wait(lambda: any(acked > cut for _, _, acked in load.events), 60,
              "an acknowledgement after the failover")
        time.sleep(after_s)  # load after the failover
        load.stop.set()
        thread.join(30)

        result.subscriptions_acknowledged = len(load.subscriptions)
        result.events_acknowledged = len(load.events)
        result.events_refused = load.refused
        after = [acked for _, _, acked in load.events if acked > cut]
        result.cut_to_first_ack_s = round(min(after) - cut, 3) if after else None
        with psycopg.connect(standby.url("edn")) as conn:
            stored = "\n".join(row[0] for row in conn.execute(
                "SELECT convert_from(notify_to, 'UTF8') FROM source.eventing_subscriptions "
                "WHERE status = 'active'"))
        lost = [path for path, _, _ in load.subscriptions if f"{sink.url}{path}<" not in stored]
        result.subscriptions_lost = len(lost)
        expected = {(path, number) for path, _, s_acked in load.subscriptions
                    for number, e_sent, _ in load.events if s_acked < e_sent}
        result.notifications_expected = len(expected)

        def received() -> dict:
            copies: dict = {}
            for message in list(sink.messages):
                match = re.search(rb"<q:n>(\d+)</q:n>", message.body)
                if match:
                    key = (message.path, int(match.group(1)))
                    copies[key] = copies.get(key, 0) + 1
            return copies

        deadline = time.monotonic() + drain_timeout
        while time.monotonic() < deadline and not expected <= set(received()):
            time.sleep(0.2)
        copies = received()
        missing = sorted(expected - set(copies))
        result.notifications_lost = len(missing)
        result.lost_examples = missing[:20] + [f"subscription {p}" for p in lost[:5]]
        result.duplicates = sum(n - 1 for n in copies.values() if n > 1)
        standby.close()
        primary.close()
    return result


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"waited {timeout} s for {what}")
