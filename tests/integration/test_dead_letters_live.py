"""Dead letters on a real ``edn serve source`` (gunicorn, 2 workers) and a real HTTP sink,
driven through the ``edn dead-letters`` command: a refusing sink -> dead letters -> list ->
the sink accepts again -> redeliver -> the notifications arrive with the MessageIDs they had
when they died."""
from __future__ import annotations

import json
import threading
import time

from lxml import etree

from edn.cli import main
from subscription_manager.client import EventingClient
from tests.support.processes import ServerProcess
from wsframework import ns
from wsframework.admin import AdminClient
from wsframework.publisher import publish
from wsframework.transport import HttpTransport

Q = "urn:quotes"
SETTINGS = ["--set", "delivery_backoff=0.05", "--set", "delivery_retries=2",
            "--set", "sweep_interval=0.2", "--set", "end_subscription_on_dead_letter=false"]


def quote(price):
    return etree.fromstring(f'<q:quote xmlns:q="{Q}"><q:price>{price}</q:price></q:quote>')


def edn_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_dead_letters_listed_and_redelivered_with_their_message_ids(tmp_path, sink, capsys):
    sink.status = 500
    with ServerProcess("source", data_dir=tmp_path / "source", extra_args=SETTINGS) as source:
        AdminClient(source.base_url, source.admin_token).create_topic("stocks")
        at = ["--at", source.base_url, "--token", source.admin_token]
        transport = HttpTransport(timeout=(3.0, 10.0))
        try:
            client = EventingClient("2011", transport=transport)
            client.subscribe(source.base_url + "/topics/stocks", sink.url + "/notify",
                             filter="q:price > 1", namespaces={"q": Q})
            for price in (5, 6, 7):
                publish(source.base_url, "stocks", quote(price))
            deadline = time.monotonic() + 20
            pause = threading.Event()
            while True:  # three notifications, three attempts each, then dead letters
                listed = edn_json(capsys, "dead-letters", "list", *at)
                if listed["total"] == 3 or time.monotonic() > deadline:
                    break
                pause.wait(0.1)
            assert listed["total"] == 3, listed
            assert all(d["Attempts"] == 3 and d["Reason"] == "HTTP 500"
                       for d in listed["dead_letters"])
            assert sink.messages == []
            sink.status = 202
            answer = edn_json(capsys, "dead-letters", "redeliver", "--all", *at)
            assert answer == {"redelivered": 3, "unknown": []}
            received = sink.wait_for(3, timeout=15)
            ids = sorted(m.envelope.header(ns.qname(ns.WSA10, "MessageID")).text
                         for m in received)
            assert ids == sorted(d["MessageId"] for d in listed["dead_letters"])
            assert edn_json(capsys, "dead-letters", "list", *at)["total"] == 0
            # purge and bad input through the command
            assert edn_json(capsys, "dead-letters", "purge", "--all", *at) == {"purged": 0}
            assert main(["dead-letters", "list", "--limit", "5000", *at]) == 2  # a fault
            assert main(["dead-letters", "list", "--at", source.base_url,
                         "--token", "wrong"]) == 2
        finally:
            transport.close()
