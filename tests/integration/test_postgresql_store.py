"""A role on PostgreSQL (``edn serve --store postgresql://...``): two processes standing for
two hosts of one source, one of them with two workers, share one schema. A subscription
made at one is renewed, read and ended at the other; every publication, at either, reaches
every subscription once; nothing of the state is in a SQLite file. A throwaway cluster
(``benchmarks.postgres_cluster``) is started for the module and stopped after it."""
from __future__ import annotations

import dataclasses
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from benchmarks.postgres_cluster import PostgresCluster, unavailable_reason
from tests.support.processes import ServerProcess
from subscription_manager.client import EventingClient
from wsframework.admin import AdminClient

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=str(unavailable_reason()))


@pytest.fixture(scope="module")
def database():
    with PostgresCluster() as cluster:
        yield cluster.create_database("edn")


def _publish(topic: str, k: int) -> None:
    from lxml import etree

    from wsframework.addressing import WsaVersion, request_headers
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.soap import SoapVersion, build_envelope
    body = etree.fromstring(f'<q:quote xmlns:q="urn:q"><q:n>{k}</q:n></q:quote>'.encode())
    envelope = build_envelope(SoapVersion.SOAP12, body,
                              request_headers(WsaVersion.WSA10, topic, PUBLISH_ACTION))
    answer = requests.post(topic, data=envelope, timeout=30,
                           headers={"Content-Type": "application/soap+xml"})
    assert answer.status_code == 202, answer.text[:300]


def _at(handle, base_url: str):
    """The same subscription, managed through another process's address."""
    path = handle.manager.address.split("/", 3)[3]
    moved = dataclasses.replace(handle.manager, address=f"{base_url}/{path}")
    assert moved.address != handle.manager.address
    return dataclasses.replace(handle, manager=moved)


def test_two_processes_of_one_source_share_its_state_in_postgresql(tmp_path, database, sink):
    shared = ["--store", database, "--store-schema", "source_shared"]
    first = ServerProcess("source", data_dir=tmp_path / "a", workers=2, extra_args=shared)
    second = ServerProcess("source", data_dir=tmp_path / "b", extra_args=shared)
    with first, second:
        AdminClient(first.base_url, first.admin_token).create_topic("stocks")
        topics = [f"{server.base_url}/topics/stocks" for server in (first, second)]
        client = EventingClient("2011")
        with ThreadPoolExecutor(8) as pool:
            handles = list(pool.map(
                lambda k: client.subscribe(topics[k % 2], f"{sink.url}/s{k}", expires="PT1H"),
                range(20)))
        # each subscription managed at the other process: renewed, read, one of them ended
        handles = [_at(handle, (second if k % 2 == 0 else first).base_url)
                   for k, handle in enumerate(handles)]
        assert client.get_status(handles[0]) is not None
        client.renew(handles[1], "PT2H")
        client.unsubscribe(handles[2])
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: _publish(topics[k % 2], k), range(10)))
        expected = 19 * 10
        received = sink.wait_for(expected, timeout=60)
        assert len(received) == expected
        assert not sink.wait_count(expected + 1, timeout=2)  # and nothing more
        assert not any(m.path == "/s2" for m in received)  # ended at the other process
        copies = {(m.path, re.search(rb"<q:n>(\d+)</q:n>", m.body).group(1)) for m in received}
        assert len(copies) == expected  # each event once at each subscription
    for server in (first, second):
        assert not (server.data_dir / "edn.db").exists()  # the state is in PostgreSQL only


def test_a_wrong_store_url_stops_the_start_with_its_reason(tmp_path):
    server = ServerProcess("source", data_dir=tmp_path / "a",
                           extra_args=["--store", "postgresql://nobody@/nowhere?host=/nonexistent"])
    with pytest.raises(Exception):
        server.start(timeout=30)
    assert "cannot reach the store" in server.log_text()
    server.stop()
