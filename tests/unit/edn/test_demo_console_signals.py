"""``keep_running`` stops in order whenever the stop signal lands: a reader of its output may
send it as soon as the first line appears, while the rest still prints."""
import signal
from types import SimpleNamespace

import pytest

from edn import demo_console


def _entry(pid):
    return SimpleNamespace(base_url="http://127.0.0.1:1", proc=SimpleNamespace(pid=pid))


@pytest.fixture
def restore_signals():
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("interrupted_line", ["web console", "processes", "press Ctrl-C"])
def test_a_signal_while_printing_stops_in_order(monkeypatch, restore_signals, interrupted_line):
    said = []

    def say(text):
        said.append(text)
        if interrupted_line in text:
            raise KeyboardInterrupt("SIGINT")

    monkeypatch.setattr(demo_console, "_say", say)
    demo_console.keep_running(_entry(11), "token", {"a": _entry(12)}, role="source")
    assert said[-1] == "stopping everything the demo started ..."
    # while the caller's with-blocks stop the processes, a second SIGTERM is ignored
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
