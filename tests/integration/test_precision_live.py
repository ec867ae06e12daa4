"""Summary precision on a real network (gunicorn processes on loopback): set live through
``Configure`` / ``edn precision`` while events flow, delivery stays exact (no loss, no
duplicates) at none, 30% and precise; ``edn status`` shows it; self-tuning moves precision
down while the dispatcher is CPU-bound and up when it is not."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from edn.localnet.network import LocalNetwork, wait_until
from route_manager.precision import format_precision, parse_precision
from tests.support.processes import ADMIN_TOKEN
from wsframework.admin import contracts

D = 3
SERVERS = (("p1", "random", 1), ("p2", "random", 1), ("p3", "random", 1))


def configure(network: LocalNetwork, **settings) -> dict[str, str]:
    response = network.admin.call(contracts.Configure(Setting=[
        contracts.Figure(Name=k, Value=str(v)) for k, v in settings.items()]))
    return {f.Name: f.Value for f in response.Setting or []}


def cli(network: LocalNetwork, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edn.cli", *args, "--at",
                           network.dispatcher.base_url, "--admin-token", ADMIN_TOKEN],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def edn(tmp_path_factory):
    network = LocalNetwork(tmp_path_factory.mktemp("precision"), SERVERS, token=ADMIN_TOKEN, d=D,
                           load_threshold=1000,
                           dispatcher_args=["--no-self-tuning", "--set", "monitor_interval=0.1"])
    with network:
        network.create_topic()
        rng = np.random.default_rng(5)
        centres = rng.uniform(0, 10, size=(150, D))
        half = rng.uniform(0.2, 1.5, size=(150, D))
        network.subscribe(np.round(np.clip(centres - half, 0, 10), 2),
                          np.round(np.clip(centres + half, 0, 10), 2))
        yield network


def events(n: int, seed: int) -> np.ndarray:
    return np.round(np.random.default_rng(seed).uniform(0, 10, size=(n, D)), 3)


def hit_ratio_of(network: LocalNetwork, points: np.ndarray) -> float:
    before = network.dispatcher_stats()
    first, last = network.publish(points)
    expected = network.wait_delivered(first, last)
    assert network.received(first, last) == expected
    after = network.dispatcher_stats()
    copies = int(after["copies_out"]) - int(before["copies_out"])
    return copies / (len(points) * len(SERVERS))


def test_exact_delivery_at_none_30_percent_and_precise(edn):
    ratios = {}
    for value in ("none", "0.3", "precise"):
        result = cli(edn, "precision", value, "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["precision"] == value
        ratios[value] = hit_ratio_of(edn, events(80, seed=len(ratios)))
    assert ratios["none"] == 1.0
    assert ratios["none"] >= ratios["0.3"] >= ratios["precise"]
    assert ratios["precise"] < 1.0
    status = cli(edn, "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["precision"] == "precise" and report["selftuning.on"] == 0
    assert {"measure.t_f_us", "measure.t_d_us", "measure.hit_ratio", "measure.events_per_s"} <= set(report)


def test_precision_changes_while_events_flow_lose_and_duplicate_nothing(edn):
    stop = threading.Event()
    applied = []

    def flip():
        values = ("none", "0.3", "precise")
        k = 0
        while not stop.is_set():
            applied.append(configure(edn, precision=values[k % 3])["precision"])
            k += 1
            time.sleep(0.03)

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        # one event per message: precision changes land between the events' routings
        first, last = edn.publish(events(200, seed=11), batch=1, threads=1)
    finally:
        stop.set()
        flipper.join()
    assert len(set(applied)) == 3 and len(applied) >= 6
    expected = edn.wait_delivered(first, last)
    received = edn.received(first, last)
    assert received == expected  # sorted lists: no notification lost, none duplicated
    assert len(set(received)) == len(received)


def test_the_papers_self_tuning_lowers_precision_when_cpu_bound_and_raises_it_when_not(edn):
    # A threshold this low makes any steady publishing CPU-bound; idle is far below it
    # (polled slowly: every GetStats costs the dispatcher a little CPU too).
    configure(edn, **{"selftuning_interval": 0.5, "selftuning_threshold": 0.05,
                      "selftuning_max_interval": 4.0, "selftuning_rule": "paper"})
    configure(edn, self_tuning="on", precision="precise")
    stop = threading.Event()

    def publish():
        while not stop.is_set():
            edn.publish(events(40, seed=int(time.time() * 1000) % 10_000))

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        wait_until(lambda: float(edn.dispatcher_stats("precision_value")["precision_value"]) <= 0.7,
                   timeout=30, what="self-tuning to lower precision under load")
    finally:
        stop.set()
        publisher.join()
    figures = edn.dispatcher_stats("selftuning.")
    trace = [json.loads(v) for k, v in sorted(figures.items()) if k.startswith("selftuning.trace.")]
    assert any(s["cpu_bound"] and s["precision"] < s["previous"] for s in trace)
    assert all(s["signal"] in ("cpu", "busy", "cpu+busy", "backlog", "none") for s in trace)
    shown = cli(edn, "status")  # the human-readable trace
    assert shown.returncode == 0, shown.stderr
    assert "self-tuning:" in shown.stdout and "busy" in shown.stdout and "backlog" in shown.stdout
    assert "paper rule" in shown.stdout
    low = float(edn.dispatcher_stats("precision_value")["precision_value"])
    wait_until(lambda: float(edn.dispatcher_stats("precision_value")["precision_value"]) > low,
               timeout=30, what="self-tuning to raise precision when idle", poll=0.5)
    configure(edn, self_tuning="off", precision="precise", selftuning_rule="compare")
    wait_until(edn.quiet, what="an idle network")
    assert edn.received() == edn.expected()  # exact from the first event on


def test_edn_profile_apply_sets_a_running_dispatcher_and_status_shows_it(edn, tmp_path):
    base = [sys.executable, "-m", "edn.cli", "profile", "--local", "--subscriptions", "600",
            "--d", str(D), "--servers", "3", "--events", "300", "--chunk-size", "150",
            "--precisions", "0.3", "0.6", "1", "none", "--params", "paper",
            "--out", str(tmp_path / "prof"), "--json"]
    refused = subprocess.run([*base, "--apply"], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--apply needs --at" in refused.stderr
    wrong = subprocess.run([*base, "--apply", "--at", edn.dispatcher.base_url,
                            "--admin-token", "not-the-token"],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode != 0 and edn.dispatcher_stats("profile.")["profile.on"] == "0"
    done = subprocess.run([*base, "--apply", "--at", edn.dispatcher.base_url,
                           "--admin-token", ADMIN_TOKEN], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    recommended = printed["initial_precision"]
    assert printed["applied"]["precision"] == format_precision(parse_precision(str(recommended)))
    figures = edn.dispatcher_stats("profile.")
    assert figures["profile.on"] == "1" and figures["profile.points"] == "4"
    assert abs(float(figures["profile.applied_at"]) - time.time()) < 120
    shown = cli(edn, "status")
    assert shown.returncode == 0, shown.stderr
    assert f"precision profile in force: recommends {recommended}" in shown.stdout
    configure(edn, precision="precise")
