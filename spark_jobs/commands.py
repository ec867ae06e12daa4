"""The ``edn profile``, ``edn study partitioning``, ``edn spark-cluster`` and ``edn record`` commands (argument parsing lives here;
:mod:`edn.cli` only registers them).  Progress goes to stderr, results to stdout
(``--json``: one JSON object) and to files in ``--out``."""
from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from wsframework.commandline import key_value
from wsframework.exceptions import SoapFault
from wsframework.transport import TransportError

from .inputs import PARTITIONERS

__all__ = ["add_profile_parser", "add_study_parser", "add_cluster_parser", "add_record_parser"]


def _spark_options(p) -> None:
    g = p.add_argument_group("Spark")
    g.add_argument("--master", default="local[*]",
                   help="Spark master (default local[*]; a spark:// or yarn master is passed "
                        "unchanged)")
    g.add_argument("--conf", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                   help="a Spark setting (repeatable)")
    g.add_argument("--local", action="store_true",
                   help="no Spark: run the same kernels in this process")


def add_profile_parser(sub) -> None:
    p = sub.add_parser("profile", help="Spark job: route time and hit ratio per summary "
                                       "precision, and the precision to run at",
                       description=__doc__)
    src = p.add_argument_group("subscriptions: a workload spec (default) or server stores")
    src.add_argument("--workload", choices=("uniform", "zipf"), default="uniform")
    src.add_argument("--subscriptions", type=int, default=10_000)
    src.add_argument("--d", type=int, default=8, help="dimensions (default 8, as section IV)")
    src.add_argument("--servers", type=int, default=10)
    src.add_argument("--partitioner", choices=PARTITIONERS, default="random",
                     help="how the workload is spread over the servers (default random, "
                          "as for Fig. 7)")
    src.add_argument("--alpha", type=float, default=1.0, help="Zipf exponent")
    src.add_argument("--seed", type=int, default=1)
    src.add_argument("--stores", nargs="+", metavar="PATH",
                     help="the servers' data directories or edn.db files (instead of a "
                          "workload); needs --topic")
    src.add_argument("--from-network", metavar="DISPATCHER", default=None,
                     help="read the subscriptions of every server registered at this "
                          "dispatcher through admin messages (ExportBoxes; needs --topic and "
                          "the admin credential)")
    src.add_argument("--max-boxes", type=int, default=None,
                     help="with --from-network: read at most this many rectangles in all "
                          "(default 5,000,000)")
    src.add_argument("--topic", help="the topic whose subscriptions to profile (with --stores "
                                     "or --from-network)")
    ev = p.add_argument_group("sample events")
    ev.add_argument("--events", type=int, default=10_000, help="how many (default 10,000)")
    ev.add_argument("--events-file", help="events from a trace of edn record (.parquet), a "
                                          ".npy or a CSV file (one point per line)")
    ev.add_argument("--event-workload", choices=("uniform", "zipf", "normal"), default=None,
                    help="event distribution (default: the subscriptions' workload)")
    run = p.add_argument_group("profile")
    run.add_argument("--precisions", nargs="+", default=None, metavar="P",
                     help="precisions in (0,1] and 'none' (default 0.1 ... 1.0 none)")
    run.add_argument("--routing", choices=("single", "batch"), default="single",
                     help="time route() per event (the dispatcher's way, default) or "
                          "route_batch per chunk")
    run.add_argument("--chunk-size", type=int, default=2000, help="events per routing task")
    run.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                     help="time with perf_counter (default) or the task thread's CPU time "
                          "(steadier on a loaded, shared machine)")
    run.add_argument("--match-sample", type=int, default=10_000,
                     help="events timed on each server's engine (T_s)")
    par = p.add_argument_group("throughput model (eqs. 3, 4)")
    par.add_argument("--params", default=None, metavar="PRESET|FILE",
                     help="'paper' (T_f 1.6 ms, T_c 0, S_m 3 KB, B 80 Mbps), 'fig7' (T_f 0, "
                          "T_l 100 us) or a JSON file of measured parameters "
                          "(e.g. from edn status --json)")
    par.add_argument("--t-f-ms", type=float, default=None, help="T_f, per-event fixed cost")
    par.add_argument("--t-c-ms", type=float, default=None, help="T_c, per-copy cost")
    par.add_argument("--bandwidth-mbps", type=float, default=None, help="B, outgoing link")
    par.add_argument("--message-bytes", type=float, default=None, help="S_m")
    par.add_argument("--load-factor", type=float, default=None, help="F, servers' expansion")
    out = p.add_argument_group("output")
    out.add_argument("--out", default="edn-profile", help="output directory (default ./edn-profile)")
    out.add_argument("--from-profile", metavar="CSV", default=None,
                     help="choose again from an earlier profile.csv (no profiling)")
    out.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    apply = p.add_argument_group("applying it to a running dispatcher")
    apply.add_argument("--apply", action="store_true",
                       help="set the dispatcher at --at to the recommended precision and hand "
                            "it the profile (its self-tuner's model of throughput)")
    apply.add_argument("--at", default=None, metavar="URL", help="the dispatcher (with --apply)")
    apply.add_argument("--admin-token", default=None,
                       help="the network's admin credential (default: EDN_ADMIN_TOKEN)")
    _spark_options(p)
    p.set_defaults(func=cmd_profile)


def _inputs(args):
    from . import inputs

    events_array = inputs.load_events(args.events_file) if args.events_file else None
    if args.from_network:
        from .live_network import MAX_BOXES, from_network

        if args.stores or not args.topic:
            raise SystemExit("edn profile: --from-network needs --topic (and no --stores)")
        return from_network(args.from_network, args.topic, _admin_clients(args),
                            events_array=events_array, events=args.events,
                            event_kind=args.event_workload or "uniform", seed=args.seed + 1,
                            max_boxes=args.max_boxes or MAX_BOXES,
                            progress=lambda text: print(f"edn profile: {text}", file=sys.stderr))
    if args.stores:
        if not args.topic:
            raise SystemExit("edn profile: --stores needs --topic")
        return inputs.from_stores(args.stores, args.topic, events_array=events_array,
                                  events=args.events, event_kind=args.event_workload or "uniform",
                                  seed=args.seed + 1)
    return inputs.from_workload(args.workload, args.subscriptions, args.d, args.servers,
                                partitioner=args.partitioner, events=args.events,
                                event_kind=args.event_workload, events_array=events_array,
                                seed=args.seed, alpha=args.alpha)


def _admin_token(args, command: str) -> str:
    from route_manager.protocol import SERVICE_NAMES

    token = args.admin_token or os.environ.get(SERVICE_NAMES.admin_token_env)
    if not token:
        raise SystemExit(f"edn {command}: needs the admin credential: --admin-token or "
                         f"{SERVICE_NAMES.admin_token_env}")
    return token


def _admin_clients(args):
    """Admin clients with the network's credential, one per address."""
    from wsframework.admin import AdminClient

    token = _admin_token(args, "profile")
    return lambda address: AdminClient(address, token)


def _parameters(args, n_servers: int):
    from .selection import PRESETS, system_parameters

    preset = file = None
    if args.params in PRESETS:
        preset = args.params
    elif args.params:
        file = args.params
    ms = lambda v: None if v is None else v * 1e-3  # noqa: E731
    return system_parameters(
        n_servers, preset=preset, file=file, t_f=ms(args.t_f_ms), t_c=ms(args.t_c_ms),
        bandwidth=None if args.bandwidth_mbps is None else args.bandwidth_mbps * 1e6 / 8,
        message_size=args.message_bytes, load_factor=args.load_factor)


def _fmt(value, scale=1.0, digits=2):
    if value is None or (isinstance(value, float) and (math.isinf(value) or math.isnan(value))):
        return "-"
    return f"{value * scale:,.{digits}f}"


def cmd_profile(args) -> int:
    from .profile import ProfileOptions, parse_precisions, profile_local
    from wsframework.progress import progress as bar_of
    from .selection import write_outputs
    from .session import progress

    started = time.perf_counter()
    say = lambda text: progress(text, prefix="edn profile")  # noqa: E731
    _check_apply(args)  # before a long profile, not after it
    if args.from_profile:
        return _reselect(args, say, started)
    try:
        options = ProfileOptions(
            precisions=parse_precisions(args.precisions) if args.precisions else
            ProfileOptions().precisions,
            chunk_size=args.chunk_size, mode=args.routing, match_sample=args.match_sample,
            clock=args.clock)
        say("preparing subscriptions and events")
        data = _inputs(args)
        params = _parameters(args, len(data.servers))
    except (ValueError, LookupError, OSError, SoapFault, TransportError) as exc:
        raise SystemExit(f"edn profile: {exc}") from None
    say(f"{data.rectangle_count:,} rectangles on {len(data.servers)} servers, "
        f"{len(data.events):,} events, d = {data.d}")
    out = Path(args.out)
    if args.local:
        with bar_of("edn profile: routing", unit="task", quiet=args.json) as bar:
            profile = profile_local(data, options, progress=say, bar=bar)
        recommendation = write_outputs(profile, params, out)
    else:
        from .job import run_profile
        from .session import spark_session

        say(f"starting Spark ({args.master})")
        with spark_session(args.master, app_name="edn-profile", conf=dict(args.conf),
                           log_dir=out / "spark-logs") as spark:
            say(f"Spark up in {spark.edn_start_seconds:.1f} s "
                f"({spark.sparkContext.defaultParallelism} cores)")
            with bar_of("edn profile: routing", unit="task", quiet=args.json) as bar:
                profile = run_profile(spark, data, options, progress=say, bar=bar)
            profile.meta["spark_start_seconds"] = round(spark.edn_start_seconds, 2)
            recommendation = write_outputs(profile, params, out, spark=spark)
    wall = time.perf_counter() - started
    recommendation["profile"]["wall_seconds"] = round(wall, 2)
    (out / "recommendation.json").write_text(json.dumps(recommendation, indent=2))
    say(f"done in {wall:.1f} s; files in {out}")
    return _report(args, profile, recommendation, out, _applied(args, recommendation, out))


def _reselect(args, say, started) -> int:
    from .selection import read_csv, write_outputs

    try:
        profile = read_csv(args.from_profile)
        params = _parameters(args, len(profile.servers))
    except (ValueError, OSError, KeyError) as exc:
        raise SystemExit(f"edn profile: {exc}") from None
    out = Path(args.out)
    recommendation = write_outputs(profile, params, out)
    say(f"chose from {args.from_profile} in {time.perf_counter() - started:.1f} s; files in {out}")
    return _report(args, profile, recommendation, out, _applied(args, recommendation, out))


def _check_apply(args) -> None:
    if args.apply and not args.at:
        raise SystemExit("edn profile: --apply needs --at DISPATCHER")
    if args.apply:
        _admin_token(args, "profile --apply")


def _applied(args, recommendation: dict, out: Path) -> dict | None:
    """With ``--apply``: the recommendation's precision and profile set at the dispatcher
    (one Configure, stored there for its restarts); the settings it answers in force."""
    if not args.apply:
        return None
    from route_manager.precision_profile import InvalidPrecisionProfile, PrecisionProfile
    from wsframework.admin import AdminClient, contracts

    token = _admin_token(args, "profile --apply")
    try:
        profile = PrecisionProfile.from_recommendation(
            recommendation, source=f"edn profile --out {out}"[:200])
    except InvalidPrecisionProfile as exc:
        raise SystemExit(f"edn profile: this profile cannot be applied: {exc}") from None
    answer = AdminClient(args.at, token).call(contracts.Configure(Setting=[
        contracts.Figure(Name="precision", Value=str(profile.initial_precision)),
        contracts.Figure(Name="profile", Value=profile.to_text())]))
    return {f.Name: f.Value for f in answer.Setting or []}


def _report(args, profile, recommendation: dict, out: Path, applied: dict | None) -> int:
    if args.json:
        print(json.dumps({**recommendation, "applied": applied} if applied is not None
                         else recommendation, indent=2))
        return 0
    print(f"{'precision':>9} {'boxes':>9} {'R':>7} {'T_d us':>8} {'T_s us':>8} "
          f"{'TP_D':>9} {'TP_OL':>9} {'TP ev/s':>9}  bottleneck     routing")
    rows = {r.precision_label: r for r in profile.aggregate()}
    for point in recommendation["curve"]:
        row = rows[point["precision"]]
        print(f"{point['precision']:>9} {row.summary_boxes:>9,} {point['hit_ratio']:>7.4f} "
              f"{_fmt(point['t_d'], 1e6):>8} {_fmt(point['t_s'], 1e6):>8} "
              f"{_fmt(point['tp_d'], digits=0):>9} {_fmt(point['tp_ol'], digits=0):>9} "
              f"{_fmt(point['throughput'], digits=0):>9}  {point['bottleneck']:<13}  "
              f"{row.strategy}")
    rtp = recommendation.get("rtp_vs_precise")
    print(f"recommended precision: {recommendation['initial_precision']} "
          f"(predicted {_fmt(recommendation['predicted_throughput'], digits=0)} events/s, "
          f"{_fmt(rtp)}x precise, {_fmt(recommendation.get('rtp_vs_none'))}x no summary)")
    if applied is not None:
        print(f"applied at {args.at}: precision {applied.get('precision')}, the profile handed "
              f"to its self-tuner ({applied.get('self_tuning')})")
    else:
        print(f"start the dispatcher with: edn serve dispatcher --precision-profile "
              f"{out / 'recommendation.json'}, or apply it to a running one with --apply --at")
    return 0


# -- edn study partitioning --------------------------------------------------------------------------

def add_study_parser(sub) -> None:
    p = sub.add_parser("study", help="Spark studies at scale (partitioning, paper III-C)")
    ssub = p.add_subparsers(dest="study", required=True)
    s = ssub.add_parser("partitioning", help="hit ratio vs servers (Fig. 3) or vs Zipf alpha "
                                             "(Figs. 5, 6) for each partitioner")
    s.add_argument("--workload", choices=("uniform", "zipf"), default="uniform")
    s.add_argument("--servers", type=int, nargs="+", default=[10, 20, 50, 100])
    s.add_argument("--per-server", type=int, default=10_000,
                   help="subscriptions per server (default 10,000, the paper's)")
    s.add_argument("--subscriptions", type=int, default=None,
                   help="a fixed total instead of --per-server")
    s.add_argument("--d", type=int, default=4)
    s.add_argument("--partitioners", nargs="+", choices=PARTITIONERS,
                   default=["random", "offline_rtree", "kmeans"],
                   help="(kmeans runs on Spark ML; online_rtree is sequential and slow at 1M)")
    s.add_argument("--alphas", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0])
    s.add_argument("--events", type=int, default=10_000)
    s.add_argument("--chunk-size", type=int, default=2500)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--out", default="edn-study")
    s.add_argument("--json", action="store_true")
    _spark_options(s)
    s.set_defaults(func=cmd_study)


STUDY_BAR = "edn study: partitionings and hit ratios"  # a terminal's progress bar


def cmd_study(args) -> int:
    from wsframework.progress import progress as bar_of
    from .session import progress
    from .study import plan_study, run_study, study_local

    say = lambda text: progress(text, prefix="edn study")  # noqa: E731
    started = time.perf_counter()
    try:
        plan = plan_study(workload=args.workload, servers=args.servers,
                          per_server=args.per_server, subscriptions=args.subscriptions, d=args.d,
                          partitioners=args.partitioners, alphas=args.alphas,
                          events=args.events, chunk_size=args.chunk_size, seed=args.seed)
    except ValueError as exc:
        raise SystemExit(f"edn study: {exc}") from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say(f"{len(plan.configs)} configurations, {len(plan.tasks())} hit-ratio tasks")
    if args.local:
        with bar_of(STUDY_BAR, unit="step", quiet=args.json) as bar:
            result = study_local(plan, progress=say, bar=bar)
        _write_study(result, out, None, args)
    else:
        from .session import spark_session

        with spark_session(args.master, app_name="edn-study", conf=dict(args.conf),
                           log_dir=out / "spark-logs") as spark:
            say(f"Spark up in {spark.edn_start_seconds:.1f} s")
            with bar_of(STUDY_BAR, unit="step", quiet=args.json) as bar:
                result = run_study(spark, plan, progress=say, bar=bar)
            _write_study(result, out, spark, args)
    result.meta["wall_seconds"] = round(time.perf_counter() - started, 2)
    (out / "study.json").write_text(json.dumps({"meta": result.meta, "rows": result.rows},
                                               indent=2))
    say(f"done in {result.meta['wall_seconds']:.1f} s; files in {out}")
    if args.json:
        print(json.dumps({"meta": result.meta, "rows": result.rows}))
    else:
        for row in result.rows:
            print(f"{row['figure']}\t{row['config']}\t{row['events_kind']} events\t"
                  f"R {row['hit_ratio']:.4f}\tpartition {row['partition_seconds']} s")
    return 0


def _write_study(result, out: Path, spark, args) -> None:
    import csv

    if not result.rows:
        return
    columns = list(result.rows[0])
    with open(out / "study.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(result.rows)
    if spark is not None:
        spark.createDataFrame([tuple(r[c] for c in columns) for r in result.rows],
                              columns).coalesce(1).write.mode("overwrite").parquet(
            str(out / "study.parquet"))
    _plot_study(result, out / "study.png", args.workload)


def _plot_study(result, path: Path, workload: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figures = sorted({r["figure"] for r in result.rows})
    fig, axes = plt.subplots(1, len(figures), figsize=(6.5 * len(figures), 4.5), squeeze=False)
    for ax, figure in zip(axes[0], figures):
        rows = [r for r in result.rows if r["figure"] == figure]
        x_key = "servers" if figure == "fig3" else "alpha"
        for name in sorted({r["partitioner"] for r in rows}):
            mine = sorted((r for r in rows if r["partitioner"] == name), key=lambda r: r[x_key])
            label = name + (" (Spark ML)" if name == "kmeans" else "")
            ax.plot([r[x_key] for r in mine], [r["hit_ratio"] for r in mine], "o-", label=label)
        ax.set_xlabel("number of servers" if x_key == "servers" else "Zipf alpha")
        if x_key == "alpha":
            ax.set_xscale("log", base=2)
        ax.set_ylabel("hit ratio R")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title({"fig3": "Fig. 3: uniform, hit ratio vs servers",
                      "fig5": "Fig. 5: Zipf subscriptions, uniform events",
                      "fig6": "Fig. 6: Zipf subscriptions and events"}[figure])
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- edn spark-cluster -------------------------------------------------------------------------

def add_cluster_parser(sub) -> None:
    p = sub.add_parser("spark-cluster",
                       help="run a Spark standalone master and its workers (pyspark's own "
                            "launch classes) until Ctrl-C, for --master of profile and study")
    p.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address every daemon binds (default 127.0.0.1)")
    p.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    p.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    p.add_argument("--dir", default=None, metavar="DIR",
                   help="logs and work directories (default: a temporary directory)")
    p.set_defaults(func=cmd_cluster)


def cmd_cluster(args) -> int:
    import signal

    from .cluster import ClusterFailed, StandaloneCluster

    if args.workers < 1 or args.cores < 1:
        raise SystemExit("edn spark-cluster: --workers and --cores are at least 1")

    def stop(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    cluster = StandaloneCluster(args.workers, host=args.host, cores=args.cores,
                                memory=args.memory, directory=args.dir)
    failed = False
    try:
        cluster.start()
        print(f"master: {cluster.master_url}", flush=True)
        print(f"master web UI: {cluster.ui_url}", flush=True)
        print(f"{args.workers} workers of {args.cores} core(s) and {args.memory}; logs in "
              f"{cluster.directory}", flush=True)
        print(f"use: edn profile --master {cluster.master_url} ...; Ctrl-C stops the cluster",
              flush=True)
        while True:
            signal.pause()
    except ClusterFailed as exc:
        failed = True  # (start() stopped what it started; its logs stay to be read)
        raise SystemExit(f"edn spark-cluster: {exc}") from None
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("stopping the cluster ...", flush=True)
    finally:
        cluster.stop(keep_logs=failed)
        signal.signal(signal.SIGTERM, previous)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the edn command")


# -- edn record --------------------------------------------------------------------------------

def add_record_parser(sub) -> None:
    p = sub.add_parser("record", help="sample the events a running dispatcher routes on a "
                                      "topic into a Parquet trace, for edn profile --events-file")
    p.add_argument("--at", required=True, metavar="DISPATCHER", help="the dispatcher's URL")
    p.add_argument("--topic", required=True, help="the topic whose events to record")
    p.add_argument("--events", type=int, default=10_000,
                   help="how many events (default 10,000; at most 100,000)")
    p.add_argument("--every", type=int, default=1,
                   help="keep every K-th event published (default 1: each)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds to wait for the events (default 600; then what is there)")
    p.add_argument("--out", default="edn-trace", help="output directory (default ./edn-trace)")
    p.add_argument("--admin-token", default=None,
                   help="the network's admin credential (default: EDN_ADMIN_TOKEN)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_record)


def cmd_record(args) -> int:
    from route_manager.dispatcher.recording import MAX_EVENTS, MAX_EVERY
    from wsframework.admin import AdminClient

    from .live_network import TRACE_FILE, record_events, write_trace

    if not 1 <= args.events <= MAX_EVENTS or not 1 <= args.every <= MAX_EVERY:
        raise SystemExit(f"edn record: --events is 1 to {MAX_EVENTS:,}, --every 1 to "
                         f"{MAX_EVERY:,}")
    if not 0 < args.timeout < math.inf:
        raise SystemExit("edn record: --timeout is a positive number of seconds")
    try:  # before recording: a trace that cannot be written must not be recorded
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise SystemExit("edn record: writing Parquet needs pyarrow: pip install -e "
                         "'.[spark]'") from None
    client = AdminClient(args.at, _admin_token(args, "record"))
    say = lambda text: print(f"edn record: {text}", file=sys.stderr)  # noqa: E731
    started = time.monotonic()
    try:
        schema, rows = record_events(client, args.topic, args.events, every=args.every,
                                     timeout=args.timeout, progress=say)
    except (ValueError, SoapFault, TransportError) as exc:
        raise SystemExit(f"edn record: {exc}") from None
    path = Path(args.out) / TRACE_FILE
    try:
        write_trace(path, schema, args.topic, rows)
    except OSError as exc:
        raise SystemExit(f"edn record: {path}: {exc}") from None
    outcome = {"trace": str(path), "events": len(rows), "wanted": args.events,
               "topic": args.topic, "dimensions": schema.d,
               "seconds": round(time.monotonic() - started, 2)}
    if args.json:
        print(json.dumps(outcome, indent=2))
    else:
        print(f"{len(rows):,} events of {args.topic} in {path} "
              f"({'all' if len(rows) >= args.events else 'fewer than'} the "
              f"{args.events:,} asked for)")
    return 0 if rows else 1
