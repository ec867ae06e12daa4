"""The live network's own trace, read through admin messages (real gunicorn processes): ``edn
record`` samples what a two-worker dispatcher routes into Parquet, ``edn profile
--from-network`` reads the servers' rectangles by ``ExportBoxes`` (the same as their
stores hold), and every bad request of either is refused with a fault and changes nothing."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

from edn.localnet.network import TOPIC, LocalNetwork
from route_manager import protocol
from spark_jobs.inputs import from_stores
from spark_jobs.live_network import from_network, read_trace
from tests.support.processes import ADMIN_TOKEN
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault

D = 3
SERVERS = (("t1", "random", 1), ("t2", "random", 1), ("t3", "random", 1))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    network = LocalNetwork(tmp_path_factory.mktemp("trace"), SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000,
                           dispatcher_args=["--no-self-tuning", "--workers", "2"])
    with network:
        network.create_topic()
        rng = np.random.default_rng(9)
        centres = rng.uniform(0, 10, size=(120, D))
        half = rng.uniform(0.2, 1.5, size=(120, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        network.wait_routed()
        yield network


def configure(network, **settings):
    answer = network.admin.call(contracts.Configure(Setting=[
        contracts.Figure(Name=k, Value=str(v)) for k, v in settings.items()]))
    return {f.Name: f.Value for f in answer.Setting or []}


def test_edn_record_samples_the_events_a_two_worker_dispatcher_routes(net, tmp_path):
    points = np.round(np.random.default_rng(3).uniform(0, 10, size=(400, D)), 3)
    stop = threading.Event()

    def publish():
        while not stop.is_set():
            net.publish(points, batch=20, threads=2)

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "edn.cli", "record", "--at", net.dispatcher.base_url,
             "--topic", TOPIC, "--events", "300", "--every", "2", "--out", str(tmp_path),
             "--admin-token", ADMIN_TOKEN, "--json", "--timeout", "90"],
            capture_output=True, text=True, timeout=150)
    finally:
        stop.set()
        publisher.join()
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["events"] == 300 and outcome["dimensions"] == D
    recorded = read_trace(tmp_path / "events.parquet")
    assert recorded.shape == (300, D)
    published = {tuple(p) for p in points}
    assert all(tuple(np.round(p, 3)) in published for p in recorded)  # what was routed
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "events.parquet")
    assert table.schema.metadata[b"edn.topic"] == TOPIC.encode()
    assert all(xml.startswith("<") for xml in table.column("event").to_pylist())
    # stopped everywhere afterwards: a later publication records nothing
    figures = net.dispatcher_stats("record.")
    assert figures["record.on"] == "0"
    assert configure(net)["record"] == "off"


def test_profile_from_the_network_reads_what_the_servers_stores_hold(net, tmp_path):
    client_for = lambda address: AdminClient(address, ADMIN_TOKEN)  # noqa: E731
    live = from_network(net.dispatcher.base_url, TOPIC, client_for, events=50)
    stored = from_stores([net.servers[name].data_dir for name, _, _ in SERVERS], TOPIC,
                         events=50, names=[name for name, _, _ in SERVERS])
    assert live.servers == stored.servers
    assert live.schema_xml == stored.schema_xml
    for (lo, hi), (slo, shi) in zip(live.rectangles, stored.rectangles):
        assert sorted(map(tuple, np.hstack([lo, hi]))) == sorted(map(tuple, np.hstack([slo, shi])))
    assert sum(len(lo) for lo, _ in live.rectangles) == 120
    # small pages: the cursor walks every subscription once
    from spark_jobs import live_network
    paged = pytest.MonkeyPatch()
    paged.setattr(live_network, "BOXES_PAGE", 7)
    try:
        again = from_network(net.dispatcher.base_url, TOPIC, client_for, events=50)
    finally:
        paged.undo()
    assert [len(lo) for lo, _ in again.rectangles] == [len(lo) for lo, _ in live.rectangles]
    np.save(tmp_path / "events.npy", np.random.default_rng(1).uniform(0, 10, (300, D)))
    profiled = subprocess.run(
        [sys.executable, "-m", "edn.cli", "profile", "--local", "--from-network",
         net.dispatcher.base_url, "--topic", TOPIC, "--events-file", str(tmp_path / "events.npy"),
         "--precisions", "0.5", "1", "none", "--chunk-size", "150", "--params", "paper",
         "--admin-token", ADMIN_TOKEN, "--out", str(tmp_path / "prof"), "--json"],
        capture_output=True, text=True, timeout=120)
    assert profiled.returncode == 0, profiled.stderr
    recommendation = json.loads(profiled.stdout)
    assert len(recommendation["curve"]) == 3
    assert recommendation["profile"]["source"]["kind"] == "network"
    wrong = subprocess.run(
        [sys.executable, "-m", "edn.cli", "profile", "--local", "--from-network",
         net.dispatcher.base_url, "--topic", TOPIC, "--admin-token", "not-the-token",
         "--out", str(tmp_path / "no")], capture_output=True, text=True, timeout=60)
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr


@pytest.mark.parametrize("value", [
    "topic=grid,events=0", "events=5", "topic=nope,events=5", "topic=grid,events=5,every=0",
    "topic=grid,events=100001", "topic=grid,events=5,topic=grid", "x" * 600,
    "topic=grid,events=5,id=12", "topic=../x,events=5", "topic=grid,events=-1",
    "topic=grid,events=1e3", "topic=grid,events=5,colour=red"])
def test_a_bad_recording_is_refused_and_changes_nothing(net, value):
    with pytest.raises(SoapFault) as refused:
        configure(net, record=value)
    assert "record" in str(refused.value)
    assert configure(net)["record"] == "off"


def test_bad_pages_are_refused(net):
    for request in (protocol.GetRecording(After="garbage"),
                    protocol.GetRecording(After="12:" + "p" * 151),
                    protocol.GetRecording(Max=0), protocol.GetRecording(Max=10_001)):
        with pytest.raises(SoapFault):
            net.admin.call(request)
    server = AdminClient(net.servers["t1"].base_url, ADMIN_TOKEN)
    for request in (protocol.ExportBoxes(Topic="nope"), protocol.ExportBoxes(Topic=TOPIC, Max=0),
                    protocol.ExportBoxes(Topic=TOPIC, After="a" * 201)):
        with pytest.raises(SoapFault):
            server.call(request)
    answer = server.call(protocol.ExportBoxes(Topic=TOPIC, Max=1)).Boxes
    assert answer.get("next") is not None and len(answer) >= 2  # the schema, a box
    stranger = AdminClient(net.servers["t1"].base_url, "not-the-token")
    with pytest.raises(SoapFault):
        stranger.call(protocol.ExportBoxes(Topic=TOPIC))
    with pytest.raises(SoapFault):
        AdminClient(net.dispatcher.base_url, "not-the-token").call(protocol.GetRecording())
