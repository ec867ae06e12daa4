"""``edn bench richer``: the figures of Chandramouli et al.'s richer subscriptions, each
part from its own module:

* ``notify`` (:mod:`.notify`): NotifyWhen on a price trace, events delivered with and without
  the condition (messages saved), the 5.3.1 index's cost per update beside a scan for 10k to
  1M subscriptions, re-indexings with and without tolerance;
* ``intervals`` (:mod:`.intervals`): the stateless-network form (5.3.3), messages per update
  and intervals held, beside unicast, with and without tolerance;
* ``aggregate`` (:mod:`.aggregate`): the paper's Tables 2 and 3, outgoing server messages per
  update, S-CN against unicast.

The full run takes about five minutes on two shared cores; ``--quick`` a few seconds.
"""
from __future__ import annotations

import time

from .aggregate import aggregate_figures
from .intervals import interval_figures
from .notify import notify_figures
from wsframework.progress import progress

__all__ = ["run"]


def run(quick: bool = False) -> dict:
    figures, seconds = {}, {}
    parts = (("aggregate", aggregate_figures), ("intervals", interval_figures),
             ("notify", notify_figures))
    with progress("richer", total=len(parts), unit="part") as bar:
        for name, part in parts:
            bar.describe(name)
            started = time.perf_counter()
            figures[name] = part(quick)
            seconds[name] = round(time.perf_counter() - started, 1)
            bar.advance()
    figures["seconds"] = seconds
    return figures
