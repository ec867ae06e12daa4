"""``edn bench``: registered in the ``edn.commands`` entry-point group by this package."""
from __future__ import annotations

import json


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="run a benchmark")
    p.add_argument("name", nargs="?", help="benchmark name (omit to list them)")
    p.add_argument("--json", action="store_true", help="print one JSON object of named figures")
    p.add_argument("--quick", action="store_true", help="smaller sizes (for smoke tests)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where benchmarks that plot write their JSON and PNG files "
                        "(default ./edn-bench-out)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    from . import BENCHMARKS, run_benchmark
    if not args.name:
        for name, (_, doc) in sorted(BENCHMARKS.items()):
            print(f"{name}\t{doc}")
        return 0
    if args.json:
        from wsframework.progress import silence
        silence()  # no progress bar from the benchmark's steps under --json
    figures = run_benchmark(args.name, quick=args.quick, out=args.out)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key}: {value}")
    return 0
