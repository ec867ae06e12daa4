"""Crash consistency, from the system calls: a source runs under ``strace -f`` while clients
subscribe and publish at once. For every success answer a worker thread writes to a socket,
the write-ahead-log writes that thread made for the request (its commits) must be followed,
before the answer, by an ``fdatasync`` (or ``fsync``) of that log that ended after them. Then
a power cut after any acknowledgement loses nothing acknowledged.

The buffered gthread worker serves each request in one thread from start to end, so the
thread id ties a request's commits to its answer. The dispatcher's durable log commits the
publications waiting at once in one transaction, made by one of their threads: a thread
whose events another committed has no log write of its own in the trace, so there the check
is that the answers with a write are synced and that syncs are shared, and the group commit's
hand-over is checked by a unit test. Needs ``strace`` (``.ci/setup`` installs it)."""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.support.processes import ServerProcess
from wsframework.admin import AdminClient
from subscription_manager.client import EventingClient

pytestmark = [pytest.mark.skipif(shutil.which("strace") is None,
                                 reason="strace is not installed (Debian: apt install strace)"),
              pytest.mark.sqlite_only("traces the fdatasync of SQLite's files; PostgreSQL's "
                                      "commit returns once its server flushed it")]

_LINE = re.compile(r"^(?P<tid>\d+)\s+(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<fd>\d+)<(?P<path>[^>]*)>(?P<args>.*)$")
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>")
_SUCCESS = re.compile(r'"HTTP/1\.[01] 2\d\d ')


def _events(trace: str):
    """(index, tid, kind, detail) in the order of the trace; kinds: wal-write, wal-sync (at
    its end), answer (a 2xx status line written to a socket, at its start)."""
    open_calls: dict[str, tuple[str, str]] = {}  # tid -> (name, path) of an unfinished call
    for index, line in enumerate(trace.splitlines()):
        match = _LINE.match(line)
        if not match:
            continue
        tid, rest = match["tid"], match["rest"]
        resumed = _RESUMED.match(rest)
        if resumed:
            name, path = open_calls.pop(tid, (resumed["name"], ""))
            if name in ("fdatasync", "fsync") and path.endswith("-wal"):
                yield index, tid, "wal-sync", path
            continue
        call = _CALL.match(rest)
        if not call:
            continue
        name, path = call["name"], call["path"]
        # an answer counts from its start (its bytes may leave before the call returns), a
        # sync from its end, a log write from either (strace shows its start)
        if path.startswith(("TCP", "socket:")) and _SUCCESS.search(call["args"][:80]):
            yield index, tid, "answer", path
        elif rest.endswith("<unfinished ...>"):
            open_calls[tid] = (name, path)
            if name.startswith("pwrite") and path.endswith("-wal"):
                yield index, tid, "wal-write", path
        elif name in ("fdatasync", "fsync") and path.endswith("-wal"):
            yield index, tid, "wal-sync", path
        elif name.startswith("pwrite") and path.endswith("-wal"):
            yield index, tid, "wal-write", path


def check_answers_follow_syncs(trace: str) -> tuple[int, int, list[str]]:
    """(answers after commits, syncs, violations): see the module docstring."""
    last_sync_end = -1
    checked = syncs = 0
    violations = []
    writes_by_tid: dict[str, list[int]] = {}
    for index, tid, kind, detail in _events(trace):
        if kind == "wal-write":
            writes_by_tid.setdefault(tid, []).append(index)
        elif kind == "wal-sync":
            syncs += 1
            last_sync_end = index
        else:  # an answer: this thread's log writes since its last answer must be synced
            writes = writes_by_tid.pop(tid, [])
            if not writes:
                continue
            checked += 1
            if last_sync_end < writes[-1]:
                violations.append(f"thread {tid} answered at line {index} after a log write at "
                                  f"line {writes[-1]} with no sync of the log since")
    return checked, syncs, violations


def test_check_finds_an_answer_before_its_sync():
    """The checker itself, on a hand-made trace: it could fail."""
    good = "\n".join([
        '7 pwrite64(3</d/s.db-wal>, "x", 1, 0) = 1',
        '8 pwrite64(3</d/s.db-wal>, "y", 1, 1) = 1',
        '7 fdatasync(9</d/s.db-wal> <unfinished ...>',
        '8 sendto(5<TCP:[1->2]>, "HTTP/1.1 202 Accepted\\r\\n", 24, 0, NULL, 0) = 24',
        '7 <... fdatasync resumed>) = 0',
        '7 sendto(6<TCP:[1->3]>, "HTTP/1.1 200 OK\\r\\n", 17, 0, NULL, 0) = 17',
    ])
    checked, syncs, violations = check_answers_follow_syncs(good)
    assert (checked, syncs) == (2, 1)
    assert len(violations) == 1 and "thread 8" in violations[0]  # answered mid-sync


def test_every_acknowledgement_follows_an_fsync_of_its_commits(tmp_path, sink):
    trace_file = tmp_path / "trace"
    strace = ["strace", "-f", "-qq", "-y", "-s", "40", "-o", str(trace_file),
              "-e", "trace=pwrite64,pwritev,fdatasync,fsync,write,writev,sendto,sendmsg"]
    server = ServerProcess("source", data_dir=tmp_path / "source", launcher=strace,
                           extra_args=["--worker-class", "gthread", "--threads", "8"])
    server.start(timeout=90)
    try:
        AdminClient(server.base_url, server.admin_token).create_topic("stocks")
        topic = f"{server.base_url}/topics/stocks"

        def subscribe(k):
            EventingClient("2011").subscribe(topic, f"{sink.url}/s{k}", expires="PT1H")

        def publish(k):
            body = (f'<q:quote xmlns:q="urn:q"><q:price>{k}</q:price></q:quote>').encode()
            answer = requests.post(topic, data=_publish_envelope(topic, body), timeout=30,
                                   headers={"Content-Type": "application/soap+xml"})
            assert answer.status_code == 202, answer.text[:300]

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(subscribe, range(40)))
            list(pool.map(lambda k: (publish(k), subscribe(100 + k)), range(40)))
    finally:
        _stop_traced(server)
    trace = trace_file.read_text(errors="replace")
    checked, syncs, violations = check_answers_follow_syncs(trace)
    assert checked >= 120, f"only {checked} answers after commits were seen in the trace"
    assert violations == []
    assert syncs > 0  # (SQLite syncs the log itself too, at checkpoints: no upper bound)


def test_the_dispatcher_acknowledges_publications_after_an_fsync_of_its_log(tmp_path):
    import numpy as np

    from edn.localnet.network import LocalNetwork
    from tests.support.processes import ADMIN_TOKEN
    trace_file = tmp_path / "trace"
    network = LocalNetwork(tmp_path / "net", (("s1", "rtree", 1),), token=ADMIN_TOKEN, d=2,
                           load_threshold=1000, dispatcher_args=["--worker-class", "gthread",
                                                                 "--threads", "8"])
    network.dispatcher.launcher = ["strace", "-f", "-qq", "-y", "-s", "40", "-o", str(trace_file),
                                   "-e", "trace=pwrite64,pwritev,fdatasync,fsync,write,"
                                         "writev,sendto,sendmsg"]
    with network:
        network.create_topic()
        network.subscribe(np.array([[0.0, 0.0]]), np.array([[10.0, 10.0]]))
        points = np.round(np.random.default_rng(3).uniform(0, 10, size=(160, 2)), 3)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: network.publish(points[k:k + 1]), range(len(points))))
        _stop_traced(network.dispatcher)
    checked, syncs, violations = check_answers_follow_syncs(trace_file.read_text(errors="replace"))
    assert checked >= 20 and violations == []
    assert syncs > 0


def _publish_envelope(topic: str, body: bytes) -> bytes:
    from lxml import etree

    from wsframework.addressing import WsaVersion, request_headers
    from wsframework.publisher import PUBLISH_ACTION
    from wsframework.soap import SoapVersion, build_envelope
    return build_envelope(SoapVersion.SOAP12, etree.fromstring(body),
                          request_headers(WsaVersion.WSA10, topic, PUBLISH_ACTION))


def _stop_traced(server: ServerProcess) -> None:
    """SIGTERM to the traced arbiter (strace's child), then strace ends with it."""
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children")
    try:
        arbiter = int(children.read_text().split()[0])
        subprocess.run(["kill", "-TERM", str(arbiter)], check=False)
        server.proc.wait(30)
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        server.kill()
    finally:
        if server.alive():
            server.proc.send_signal(signal.SIGKILL)
