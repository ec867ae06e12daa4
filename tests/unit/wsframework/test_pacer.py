"""Pacer: a long match lets the other greenlets of a gevent worker run between filters."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from lxml import etree

from matchers import XPathFilterMatcher
from wsframework.matching import FilterSpec
from wsframework.matching.base import Pacer

XPATH10 = "http://www.w3.org/2011/03/ws-evt/Dialects/XPath10"


def test_an_engine_offers_the_cpu_between_filters(monkeypatch):
    slept = []

    def sleep(seconds):
        slept.append(seconds)
    sleep.__module__ = "time"  # the unpatched one
    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(Pacer, "interval", 0.0)
    matcher = XPathFilterMatcher()
    for n in range(5):
        matcher.add_filter(f"f{n}", FilterSpec(XPATH10, "count(//*) > 0"))
    assert matcher.match(etree.fromstring("<a><b/></a>")) == [f"f{n}" for n in range(5)]
    assert slept == [0] * 5


# Under gevent's monkey-patching (as in gunicorn's gevent worker) a greenlet that ticks
# every 10 ms keeps ticking while another greenlet runs a long match.
_GEVENT_SCRIPT = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import time, gevent
    from lxml import etree
    from matchers import XPathFilterMatcher
    from wsframework.matching import FilterSpec

    matcher = XPathFilterMatcher()
    for n in range(1500):
        matcher.add_filter(f"f{n}", FilterSpec("http://www.w3.org/2011/03/ws-evt/Dialects/XPath10",
                                               "count(//*[.//b]) > 0"))
    event = etree.fromstring("<a>" + "<c><b/></c>" * 3000 + "</a>")
    ticks = []

    def ticker():
        while True:
            ticks.append(time.perf_counter())
            gevent.sleep(0.01)

    ticking = gevent.spawn(ticker)
    gevent.sleep(0.05)
    started = time.perf_counter()
    matcher.match(event)
    took = time.perf_counter() - started
    during = [t for t in ticks if t > started]
    gaps = [b - a for a, b in zip(ticks, ticks[1:]) if b > started]
    ticking.kill()
    print(took, len(during), max(gaps))
""")


def test_under_gevent_other_greenlets_run_during_a_long_match():
    done = subprocess.run([sys.executable, "-c", _GEVENT_SCRIPT], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    took, ticks_during, longest_gap = done.stdout.split()
    # the match is long enough to matter, and the other greenlet never waited for all of it
    assert float(took) > 0.2
    assert int(ticks_during) >= 3
    assert float(longest_gap) < float(took) / 2
