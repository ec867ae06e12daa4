"""The fuzz run: start the processes, record a valid session, send ``messages`` fuzzed messages
from ``threads`` threads until the deadline, then read every process's liveness, RSS and
subscriptions (:func:`measure`; :func:`run` is ``edn bench fuzz``).

RSS is read twice: at the fuzz's end (``rss_mb_at_end``, beside the notifications each
process still owes, ``deliveries_pending_at_end``), and once those are delivered or
:data:`SETTLE_S` has passed (``rss_mb_after``, which the memory bound judges). The fuzz's
subscriptions are owed notifications of the events it published; until they are delivered
they are held in each process's delivery queue, bounded in jobs and bytes
(``delivery_queue_size``, ``delivery_queue_bytes``), and that is work in progress, not
memory kept."""
from __future__ import annotations

import http.client
import itertools
import os
import random
import re
import shutil
import socket
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from .answers import OUTCOMES, Tally, classify, parse_raw_answer
from .mutations import mutate, raw_request
from .session import TOKEN, Message, record_seeds

_ROLE_WEIGHTS = {"source": 0.35, "server": 0.35, "dispatcher": 0.30}


def _send_http(conns: dict, port: int, message: Message, timeout: float):
    """POST ``message`` over a kept-alive connection: (status, content type, body)."""
    conn = conns.get(port)
    if conn is None:
        conn = conns[port] = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", message.path, message.body, message.http_headers())
        response = conn.getresponse()
        body = response.read()
        if response.will_close:
            conn.close()
            conns.pop(port, None)
        return response.status, response.getheader("Content-Type"), body
    except BaseException:
        conn.close()
        conns.pop(port, None)
        raise


def _send_raw(port: int, data: bytes, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before reading everything
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def fuzz_one(i: int, seed: int, by_target: dict[str, list[Message]], ports: dict[str, int],
             tally: Tally, timeout: float, conns: dict, raw_share: float = 0.12) -> None:
    rng = random.Random(seed * 1_000_003 + i)

    def add(*args, **kwargs):
        tally.add(*args, index=i, **kwargs)
    target = _pick_target(rng, list(by_target))
    seed_message = rng.choice(by_target[target])
    port = ports[target]
    if rng.random() < raw_share:
        data, how = raw_request(rng, seed_message)
        try:
            answer = _send_raw(port, data, timeout)
        except socket.timeout:
            add(target, "timeout", malformed=True, status=None, request=data, mutation=how)
            return
        except OSError as exc:
            add(target, "connection_error", malformed=True, status=None, request=data,
                      mutation=how, answer=repr(exc).encode())
            return
        parsed = parse_raw_answer(answer)
        if parsed is None:
            add(target, "no_answer", malformed=True, status=None, request=data, mutation=how)
            return
        status, content_type, body = parsed
        outcome = "html" if b"<html" in answer.lower() else classify(status, content_type, body)
        add(target, outcome, malformed=True, status=status, request=data, mutation=how,
                  answer=answer)
        return
    message = mutate(rng, seed_message)
    request = (f"POST {message.path}\n{message.http_headers()}\n\n").encode() + message.body
    try:
        status, content_type, body = _send_http(conns, port, message, timeout)
    except (socket.timeout, TimeoutError):
        add(target, "timeout", malformed=message.malformed, status=None, request=request,
                  mutation=message.mutation)
        return
    except (OSError, http.client.HTTPException) as exc:
        add(target, "connection_error", malformed=message.malformed, status=None,
                  request=request, mutation=message.mutation, answer=repr(exc).encode())
        return
    outcome = classify(status, content_type, body)
    add(target, outcome, malformed=message.malformed, status=status, request=request,
              mutation=message.mutation, answer=b"%d %s\n" % (status, (content_type or "").encode())
              + body, subscribed=outcome == "2xx" and b"SubscribeResponse" in body)


def _pick_target(rng: random.Random, targets: list[str]) -> str:
    role_of = {t: ("server" if t not in ("source", "dispatcher") else t) for t in targets}
    per_role = Counter(role_of.values())
    weights = [_ROLE_WEIGHTS[role_of[t]] / per_role[role_of[t]] for t in targets]
    return rng.choices(targets, weights)[0]


#: what one subscription may cost a process, for the memory bound below: the most measured
#: for a subscription held by a server (4,208 bytes, at 200,000: docs/performance.md)
SUBSCRIPTION_BYTES = 4_300
#: what a process's resident size may grow by under the fuzz beyond its subscriptions' cost
RSS_SLACK_MB = 50.0


def memory_bound(entry: dict) -> dict:
    """The fuzz's memory goal for one process: its RSS after exceeds its RSS before by at
    most what the subscriptions the fuzz created there cost, plus :data:`RSS_SLACK_MB`."""
    if entry["rss_mb_after"] is None:
        return {"rss_growth_mb": None, "rss_growth_bound_mb": None, "memory_bounded": False}
    growth = entry["rss_mb_after"] - entry["rss_mb_before"]
    bound = entry["subscriptions_created"] * SUBSCRIPTION_BYTES / 2**20 + RSS_SLACK_MB
    return {"rss_growth_mb": round(growth, 1), "rss_growth_bound_mb": round(bound, 1),
            "memory_bounded": growth <= bound}


def group_rss_mb(master: int) -> float:
    """Resident memory (VmRSS) of a gunicorn master and its workers, in MB."""
    total_kb = 0
    for pid in _group_pids(master):
        try:
            with open(f"/proc/{pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except OSError:
            pass
    return round(total_kb / 1024, 1)


def _group_pids(master: int) -> set[int]:
    """The gunicorn master ``master`` and its workers (its children)."""
    pids = {master}
    try:
        with open(f"/proc/{master}/task/{master}/children") as handle:
            pids.update(int(pid) for pid in handle.read().split())
    except OSError:
        pass
    return pids


#: the longest the notifications a process still owes when the fuzz ends are waited for
#: (their delivery is work the fuzz asked for, not memory kept) before its settled RSS is
#: read: about what the default retries of a dead subscriber's notification take (121.5 s)
SETTLE_S = 120.0
QUICK_SETTLE_S = 10.0


def delivery_pending(base_url: str) -> int | None:
    """Notifications ``base_url``'s workers have accepted and not yet finished (queued, in
    flight or waiting for a retry), from its /metrics; None where it exposes none."""
    import requests
    try:
        text = requests.get(base_url + "/metrics", timeout=10,
                            headers={"Authorization": f"Bearer {TOKEN}"}).text
    except requests.RequestException:
        return None
    return pending_in_metrics(text)


def pending_in_metrics(text: str) -> int | None:
    """The sum of the ``edn_delivery_pending`` samples in a Prometheus text exposition."""
    found = _PENDING.findall(text)
    return int(sum(float(value) for value in found)) if found else None


_PENDING = re.compile(r"^edn_delivery_pending(?:\{[^}]*\})?\s+([0-9.e+]+)$", re.M)


def _settle(processes: dict, timeout: float) -> float:
    """Wait until no process owes a notification, at most ``timeout`` s; the seconds taken."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not any(delivery_pending(p.base_url) for p in processes.values() if p.alive()):
            break
        time.sleep(0.5)  # a poll of another process's counter: nothing here to wait on
    return round(time.monotonic() - started, 1)


def _held_subscriptions(base_url: str) -> int | None:
    from wsframework.admin import AdminClient
    from wsframework.transport import HttpTransport
    try:
        topics = AdminClient(base_url, TOKEN, transport=HttpTransport(timeout=(5.0, 20.0))).list_topics()
        return sum(int(t["filters"] or 0) for t in topics)
    except Exception:
        return None


def _answers(process, sink_url: str, topic: str | None) -> bool:
    """``/health`` is 200 and a valid request gets its valid answer."""
    import requests
    from subscription_manager.client import EventingClient
    from wsframework.admin import AdminClient
    from wsframework.transport import HttpTransport
    try:
        if requests.get(process.base_url + "/health", timeout=10).status_code != 200:
            return False
        transport = HttpTransport(timeout=(5.0, 20.0))
        if topic is None:
            AdminClient(process.base_url, TOKEN, transport=transport).list_topics()
        else:
            client = EventingClient("2011", transport=transport)
            handle = client.subscribe(f"{process.base_url}/topics/{topic}", sink_url + "/after",
                                      expires="PT5M")
            client.unsubscribe(handle)
        return True
    except Exception:
        return False


def measure(*, messages: int, deadline_s: float, servers: int = 2, threads: int = 4,
            timeout: float = 10.0, seed: int = 12, settle_s: float = SETTLE_S,
            log=None) -> dict:
    from edn.localnet.network import LocalNetwork
    from edn.localnet.processes import ServerProcess
    from edn.sink import NotificationSink
    from wsframework.transport import HttpTransport

    log = log or (lambda *a: None)
    data_dir = Path(tempfile.mkdtemp(prefix="edn-bench-fuzz-"))
    quiet = ["--log-level", "critical"]
    sink = NotificationSink(keep_bodies=False).start()
    network = LocalNetwork(data_dir, [(f"s{k + 1:02d}", "rtree", 1) for k in range(servers)],
                           token=TOKEN, d=3, sink=sink, dispatcher_args=quiet)
    for process in network.servers.values():
        process.extra_args += quiet
    source = ServerProcess("source", data_dir=data_dir / "source", admin_token=TOKEN,
                           extra_args=quiet)
    processes = {"source": source, "dispatcher": network.dispatcher, **network.servers}
    try:
        source.start()
        network.start()
        network.create_topic("grid")
        transport = HttpTransport(timeout=(5.0, 30.0))
        seeds = record_seeds(transport, token=TOKEN, sink_url=sink.url, source=source.base_url,
                             servers={n: p.base_url for n, p in network.servers.items()},
                             dispatcher=network.dispatcher.base_url)
        by_target: dict[str, list[Message]] = {}
        for message in seeds:
            by_target.setdefault(message.target, []).append(message)
        ports = {name: p.port for name, p in processes.items()}
        rss_before = {name: group_rss_mb(p.proc.pid) for name, p in processes.items()}
        pids_before = {name: _group_pids(p.proc.pid) for name, p in processes.items()}
        held_before = {name: _held_subscriptions(p.base_url) for name, p in processes.items()
                       if name != "dispatcher"}
        log(f"fuzz: {len(seeds)} seeds over {sorted(by_target)}; {messages} messages, "
            f"deadline {deadline_s:.0f} s")
        tally = Tally()
        counter = itertools.count()
        started = time.monotonic()
        deadline = started + deadline_s

        def worker():
            conns: dict = {}
            while time.monotonic() < deadline:
                i = next(counter)
                if i >= messages:
                    break
                try:
                    fuzz_one(i, seed, by_target, ports, tally, timeout, conns)
                except Exception as exc:  # a bug of this benchmark, not of the service
                    tally.add("bench", "other", malformed=False, status=None,
                              request=str(i).encode(), mutation="bench-error",
                              answer=repr(exc).encode())
            for conn in conns.values():
                conn.close()

        workers = [threading.Thread(target=worker, daemon=True, name=f"fuzz-{k}")
                   for k in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(deadline_s + timeout * 3 + 30)
        elapsed = time.monotonic() - started
        time.sleep(1.0)
        figures: dict = {
            "messages": sum(tally.sent.values()),
            "messages_asked": messages,
            "seconds": round(elapsed, 1),
            "per_s": round(sum(tally.sent.values()) / elapsed, 1) if elapsed else None,
            "deadline_hit": time.monotonic() >= deadline and sum(tally.sent.values()) < messages,
            "seeds": len(seeds),
        }
        alive = {name: p for name, p in processes.items() if p.alive()}
        rss_at_end = {name: group_rss_mb(p.proc.pid) for name, p in alive.items()}
        pending_at_end = {name: delivery_pending(p.base_url) for name, p in alive.items()}
        figures["settle_s"] = _settle(alive, settle_s)
        totals: Counter = Counter()
        for name, process in processes.items():
            counts = tally.counts.get(name, Counter())
            totals.update(counts)
            pids_after = _group_pids(process.proc.pid) if process.alive() else set()
            role = {**{n: "server" for n in network.servers}, "source": "source",
                    "dispatcher": "dispatcher"}[name]
            entry = {"role": role, "sent": tally.sent[name],
                     **{o: counts.get(o, 0) for o in OUTCOMES},
                     "http_500_malformed": counts.get("http_500_malformed", 0),
                     "http_500_by_spec": counts.get("http_500_by_spec", 0),
                     "alive": process.alive(),
                     "answers_after": _answers(process, sink.url,
                                               {"source": "stocks", "dispatcher": None}.get(name, "grid")),
                     "rss_mb_before": rss_before[name],
                     "rss_mb_at_end": rss_at_end.get(name),
                     "deliveries_pending_at_end": pending_at_end.get(name),
                     "deliveries_pending_after": (delivery_pending(process.base_url)
                                                  if process.alive() else None),
                     "rss_mb_after": group_rss_mb(process.proc.pid) if process.alive() else None,
                     "workers_replaced": len(pids_before[name] - pids_after),
                     "subscriptions_created": tally.subscribed[name]}
            entry.update(memory_bound(entry))
            if name != "dispatcher":
                entry["subscriptions_held_before"] = held_before[name]
                entry["subscriptions_held_after"] = _held_subscriptions(process.base_url)
            figures[name] = entry
        if "bench" in tally.counts:
            figures["bench_errors"] = sum(tally.counts["bench"].values())
        figures["total"] = {**{o: totals.get(o, 0) for o in OUTCOMES},
                            "http_500_malformed": totals.get("http_500_malformed", 0),
                            "http_500_by_spec": totals.get("http_500_by_spec", 0)}
        figures["receiver_fault_reasons"] = dict(tally.fault_reasons.most_common(8))
        figures["memory_bounded"] = all(figures[n]["memory_bounded"] for n in processes)
        figures["all_alive"] = all(figures[n]["alive"] and figures[n]["answers_after"]
                                   for n in processes)
        figures["examples"] = tally.examples
        return figures
    finally:
        network.close()
        if source.alive():
            try:
                source.stop()
            except Exception:
                source.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


def run(quick: bool = False, *, messages: int | None = None, deadline_s: float | None = None,
        seed: int | None = None) -> dict:
    """``messages`` and ``deadline_s`` default to 100,000 in 900 s (``quick``: 1,500 in 20 s);
    the environment variables ``EDN_FUZZ_MESSAGES``, ``EDN_FUZZ_DEADLINE_S`` and
    ``EDN_FUZZ_SEED`` override the defaults."""
    env = os.environ
    messages = messages or int(env.get("EDN_FUZZ_MESSAGES", 1_500 if quick else 100_000))
    deadline_s = deadline_s or float(env.get("EDN_FUZZ_DEADLINE_S", 20 if quick else 900))
    seed = seed if seed is not None else int(env.get("EDN_FUZZ_SEED", 12))
    return measure(messages=messages, deadline_s=deadline_s, servers=1 if quick else 2,
                   timeout=5.0 if quick else 10.0, seed=seed,
                   settle_s=QUICK_SETTLE_S if quick else SETTLE_S)
