"""Tables 2 and 3 of Chandramouli's section 4.4.5: outgoing server messages per update, S-CN
(the reformulated messages of :mod:`subscription_manager.stateful.range_min_table`) against unicast
(one message per affected subscription).

Workload (section 4.4.3, Table 1): range attribute x and aggregate attribute y both in
[0, 10,000]; the initial table holds ``n`` tuples with x and y uniform (x continuous, so no
two tuples share an x and, as in the paper's runs, no update is ignorable); subscriptions have
midpoints from N(5000, 1500) and lengths |N(1000, 1000)| (the paper does not say what it did
with negative draws: we take the absolute value), clipped to the domain.

Update model (the paper does not give its step rule; ours): each event picks a tuple uniformly
and moves its y by a random walk whose step depends on the current value,
``y' = reflect(y + N(0, 0.05 y + 10))`` into [0, 10,000] (a reflected walk on a finite domain:
an irreducible, aperiodic chain, so the statistics are stationary). A *spike* (0.5% of the
events) drops the tuple's y to ``U(0, 1)``, the bottom of the domain, so that it becomes the
minimum of most ranges around it ("affecting a large number of subscriptions"), and the next
update restores the old value (both updates counted). Each run first applies ``warmup`` events unmeasured, then measures
``events`` updates.

Counting: S-CN sends ``len(messages)`` per update (0 ignorable, 1 good, 1 + hull size bad).
Unicast sends one message per affected subscription, counted from the same messages by
Theorems 1 and 2: a subscription is affected iff it matches exactly one message, so the count
is the sum over messages of the subscriptions with ``OUTER_L < x1 <= INNER_L`` and
``INNER_R <= x2 < OUTER_R``: subscriptions sorted by x1, a searchsorted slice per message and
a vectorised test of x2 on it (no query is recomputed).

Full size: Table 2 (500,000 subscriptions; 20k..100k tuples) and Table 3 (10,000 tuples;
200k..1M subscriptions), ``events`` = 100,000 measured updates each after 10,000 unmeasured
(the paper ran 200,000 events). Unicast's average is dominated by the spikes (about 500 of
them per run), hence its noise from one table size to the next.
``quick``: 2,000 and 4,000 tuples with 20,000 subscriptions, and 20k/40k subscriptions with
2,000 tuples, 1,500 events.
"""

from __future__ import annotations

import time

import numpy as np

from subscription_manager.stateful.range_min_table import RangeMinTable

DOMAIN = 10_000.0
SPIKE_SHARE = 0.005

# The seed's figures (Tables 2 and 3), for the report next to ours.
SEED_TABLE_2 = {20_000: (2.10, 726), 40_000: (2.15, 671), 60_000: (2.18, 678),
                80_000: (2.20, 655), 100_000: (2.22, 654)}
SEED_TABLE_3 = {200_000: (2.08, 303), 400_000: (2.08, 616), 600_000: (2.08, 909),
                800_000: (2.08, 1218), 1_000_000: (2.08, 1441)}


def subscriptions(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(x1, x2) sorted by x1: midpoints N(5000, 1500), lengths |N(1000, 1000)|, clipped."""
    mid = rng.normal(5000, 1500, count)
    half = np.abs(rng.normal(1000, 1000, count)) / 2
    x1 = np.clip(mid - half, 0, DOMAIN)
    x2 = np.clip(mid + half, 0, DOMAIN)
    order = np.argsort(x1, kind="stable")
    return x1[order], x2[order]


def affected_subscriptions(messages, x1: np.ndarray, x2: np.ndarray) -> int:
    """How many subscriptions (``x1`` sorted) the messages reach: unicast's message count."""
    count = 0
    for m in messages:
        lo = np.searchsorted(x1, m.outer_l, side="right")
        hi = np.searchsorted(x1, m.inner_l, side="right")
        part = x2[lo:hi]
        count += int(np.count_nonzero((part >= m.inner_r) & (part < m.outer_r)))
    return count


def _reflect(y: float) -> float:
    while y < 0 or y > DOMAIN:
        y = -y if y < 0 else 2 * DOMAIN - y
    return y


def measure(tuples: int, subs: int, events: int, warmup: int, seed: int = 0) -> dict:
    """One configuration's averages per measured update."""
    rng = np.random.default_rng(seed)
    x1, x2 = subscriptions(subs, rng)
    table = RangeMinTable()
    xs = rng.uniform(0, DOMAIN, tuples)
    ys = rng.uniform(0, DOMAIN, tuples)
    for i in range(tuples):
        table.update(str(i), float(xs[i]), float(ys[i]))
    picks = rng.integers(0, tuples, warmup + events)
    spikes = rng.random(warmup + events) < SPIKE_SHARE
    noise = rng.normal(0, 1, warmup + events)
    drops = rng.uniform(0, 1, warmup + events)
    scn = unicast = kinds_bad = 0
    seconds = 0.0
    pending_restore: tuple[int, float] | None = None
    for e in range(warmup + events):
        if pending_restore is not None:       # a spike bounces back to its old value
            i, y_new = pending_restore
            pending_restore = None
        else:
            i = int(picks[e])
            y = float(ys[i])
            if spikes[e]:
                y_new = float(drops[e])
                pending_restore = (i, y)
            else:
                y_new = _reflect(y + float(noise[e]) * (0.05 * y + 10))
        ys[i] = y_new
        started = time.perf_counter()
        kind, messages = table.update(str(i), float(xs[i]), y_new)
        elapsed = time.perf_counter() - started
        if e < warmup:
            continue
        seconds += elapsed
        scn += len(messages)
        kinds_bad += len(messages) > 1
        unicast += affected_subscriptions(messages, x1, x2)
    return {"scn": round(scn / events, 3), "unicast": round(unicast / events, 1),
            "bad_share": round(kinds_bad / events, 3),
            "server_us_per_update": round(1e6 * seconds / events, 1)}


def aggregate_figures(quick: bool) -> dict:
    """Tables 2 and 3 by name: ``aggregate_db{n}_{scn,unicast,...}`` (varying the table at
    a fixed number of subscriptions) and ``aggregate_subs{m}_...`` (varying subscriptions at
    a fixed table), each configuration its own seeded run."""
    if quick:
        db_sizes, db_subs = [2_000, 4_000], 20_000
        sub_counts, sub_db = [20_000, 40_000], 2_000
        events, warmup = 1_500, 500
    else:
        db_sizes, db_subs = sorted(SEED_TABLE_2), 500_000
        sub_counts, sub_db = sorted(SEED_TABLE_3), 10_000
        events, warmup = 100_000, 10_000
    figures: dict = {"aggregate_events_per_run": events, "aggregate_warmup_events": warmup}
    for n in db_sizes:
        for name, value in measure(n, db_subs, events, warmup, seed=n).items():
            figures[f"aggregate_db{n}_subs{db_subs}_{name}"] = value
    for m in sub_counts:
        for name, value in measure(sub_db, m, events, warmup, seed=m + 1).items():
            figures[f"aggregate_subs{m}_db{sub_db}_{name}"] = value
    return figures


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(aggregate_figures("--quick" in sys.argv), indent=1))
