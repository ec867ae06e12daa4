"""``edn demo --console`` (smallest settings; flat, tree and the standalone source): the
network stays up after the measurements, the printed console address answers, and SIGINT or
SIGTERM stops every process the demo started (gunicorn arbiters, their workers, the sink)
with exit code 0."""
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMALLEST = ["--subscriptions", "20", "--events", "10", "--servers", "1",
            "--partitioners", "random", "--no-repartition"]


def _descendants(pid: int) -> set[int]:
    """Every living process under ``pid`` (children of children too), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited: its parent has not read its status yet


def _as_from_a_terminal() -> None:
    """The demo gets SIGINT's default action, as when a user starts it at a terminal: a test
    run started in the background (``cmd &`` in a script) inherits SIGINT ignored, and so
    would the demo, which then could not be stopped with the Ctrl-C this test sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class _Lines:
    """The demo's stdout, read by a thread so the test can wait for a line with a deadline."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if match := re.search(pattern, line):
                    return match
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no line matching {pattern!r}:\n{''.join(self.lines)}"
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"the demo ended before {pattern!r}:\n{''.join(self.lines)}"
            self.lines.append(line)

    def rest(self, timeout: float = 10) -> str:
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(line)
        return "".join(self.lines)


@pytest.mark.parametrize("stop_with,topology", [(signal.SIGINT, "flat"),
                                                (signal.SIGTERM, "flat"),
                                                (signal.SIGINT, "tree"),
                                                (signal.SIGINT, "standalone")])
def test_demo_console_keeps_the_network_up_and_stops_everything(stop_with, topology):
    args = (["--standalone", "--events", "5"] if topology == "standalone"
            else [*SMALLEST, "--topology", topology])
    demo = subprocess.Popen([sys.executable, "-m", "edn.cli", "demo", "--console", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, preexec_fn=_as_from_a_terminal)
    out = _Lines(demo.stdout)
    try:
        address = out.wait_for(r"web console: (http://\S+)/console", timeout=240).group(1)
        token = out.wait_for(r"admin token \(log in with it\): (\S+)", timeout=5).group(1)
        printed = {int(pid) for pid in re.findall(
            r"\b(\d+)\b", out.wait_for(r"processes: (.*)", timeout=5).group(1))}
        assert token
        started = _descendants(demo.pid)
        assert printed <= started  # what it says it started is what runs under it
        # each gunicorn arbiter has at least one worker below it
        assert len(started) > len(printed)

        console = requests.get(f"{address}/console", timeout=10)  # the page (login first)
        assert console.status_code == 200, console.status_code
        assert "<html" in console.text.lower()
        assert demo.poll() is None  # still running after the request: it waits for a signal
        if topology == "flat":
            _partition_shows_a_spinner_on_a_terminal_only(address, token)

        demo.send_signal(stop_with)
        assert demo.wait(90) == 0, out.rest()
        text = out.rest()
        assert "stopping everything the demo started" in text
        assert "stopped everything the demo started" in text
        left = [pid for pid in started if _alive(pid)]
        assert not left, f"still running after the demo ended: {left}"
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{address}/health", timeout=5)
    finally:
        _stop_after_a_failure(demo)


def _stop_after_a_failure(demo: subprocess.Popen) -> None:
    """When an assertion failed with the demo still running: SIGTERM unwinds it (stopping its
    network); a demo that does not end is killed with every process group under it, which a
    kill of the demo alone would leave running (its servers run in sessions of their own)."""
    if demo.poll() is not None:
        return
    below = _descendants(demo.pid)
    demo.terminate()
    try:
        demo.wait(60)
        return
    except subprocess.TimeoutExpired:
        demo.kill()
        demo.wait(10)
    for pid in below:
        for kill in (os.killpg, os.kill):  # an arbiter leads its workers' group; the sink not
            try:
                kill(pid, signal.SIGKILL)
            except OSError:  # gone already, or no group of that id
                pass


def _partition_shows_a_spinner_on_a_terminal_only(address: str, token: str) -> None:
    """``edn partition`` against the running demo: on a terminal a spinner names the wait at
    the dispatcher; piped, only the result."""
    command = [sys.executable, "-m", "edn.cli", "partition", "--at", address, "grid",
               f"--admin-token={token}"]
    on_terminal = run_on_terminal(command, cwd=ROOT)
    assert "re-partitioning grid at the dispatcher" in on_terminal
    assert "subscriptions moved" in on_terminal
    piped = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert "subscriptions moved" in piped.stdout
    assert "re-partitioning" not in piped.stdout + piped.stderr
