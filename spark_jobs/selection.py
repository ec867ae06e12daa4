"""Choosing the summary precision from a profile: equations (3) and (4) of the paper through
:mod:`route_manager.models.throughput`, and the files a profile run leaves behind.

Parameters measured on the live dispatcher (T_f, T_c, B, S_m; N_s is the profile's server
count) come from a JSON file, from presets, or from the command line
(:func:`system_parameters`).  The JSON reader takes the keys below at the top level or one
level down (e.g. under ``"throughput"`` or ``"parameters"`` of ``edn status --json``),
case-insensitively:

=============  ===============================================================
T_f            ``t_f`` (s), ``t_f_ms``, ``t_f_us``
T_c            ``t_c`` (s), ``t_c_ms``, ``t_c_us``
B              ``bandwidth`` (bytes/s), ``bandwidth_bps`` (bits/s), ``bandwidth_mbps``,
               ``b_mbps``, ``link_mbps`` (the dispatcher's link cap)
S_m            ``message_size`` / ``s_m`` / ``message_bytes`` (bytes)
F              ``load_factor`` / ``f``
=============  ===============================================================

Dotted keys count by their last part, so ``edn status --json`` (``measure.t_f_us``,
``measure.t_c_us``, ``measure.message_bytes``, ``link_mbps``) can be given as it is.  Values
that are null are skipped (an uncapped link gives no B: pass ``--bandwidth-mbps``).

Presets: ``paper`` (section V-B: T_f 1.6 ms, T_c 0, S_m 3 KB, B 80 Mbps) and ``fig7``
(section IV-A: T_f = T_c = 0, T_l = 1 KB / 10 MB/s = 100 us per message).

Outputs (:func:`write_outputs`): ``profile.csv`` and ``profile.parquet`` (one row per
precision and server, plus a ``*`` row per precision for all servers), ``recommendation.json``
(the precision to start the dispatcher at, the predicted curve and the relative throughput
figures) and ``throughput.png`` (predicted throughput against precision).
"""
from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from route_manager.models.throughput import (Prediction, SystemParameters, optimal, predict_curve,
                                             rtp_precise_link)
from .profile import Profile, precision_label

__all__ = [
    "PRESETS",
    "RECOMMENDATION_FORMAT",
    "crossing",
    "parameters_from_mapping",
    "recommend",
    "system_parameters",
    "write_outputs",
]

RECOMMENDATION_FORMAT = "edn-precision-recommendation/1"

PRESETS: dict[str, SystemParameters] = {
    "paper": SystemParameters.paper_implementation(),
    "fig7": SystemParameters(n_servers=10, t_f=0.0, t_c=0.0, bandwidth=10e6, message_size=1000.0),
}

_KEYS = {
    "t_f": (("t_f", 1.0), ("t_f_ms", 1e-3), ("t_f_us", 1e-6)),
    "t_c": (("t_c", 1.0), ("t_c_ms", 1e-3), ("t_c_us", 1e-6)),
    "bandwidth": (("bandwidth", 1.0), ("bandwidth_bytes", 1.0), ("bandwidth_bps", 1 / 8),
                  ("bandwidth_mbps", 1e6 / 8), ("b_mbps", 1e6 / 8), ("link_mbps", 1e6 / 8),
                  ("b", 1.0)),
    "message_size": (("message_size", 1.0), ("s_m", 1.0), ("message_bytes", 1.0),
                     ("s_m_bytes", 1.0)),
    "load_factor": (("load_factor", 1.0), ("f", 1.0)),
}


def _flatten(data: Mapping) -> dict[str, Any]:
    """Keys lower-cased: top-level ones first, then dotted ones by their last part
    (``measure.t_f_us``) and keys one object down, neither overriding an earlier one."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(value, Mapping) and "." not in str(key):
            out[str(key).lower()] = value
    for key, value in data.items():
        if not isinstance(value, Mapping) and "." in str(key):
            out.setdefault(str(key).rsplit(".", 1)[1].lower(), value)
    for value in data.values():
        if isinstance(value, Mapping):
            for key, inner in value.items():
                if not isinstance(inner, Mapping):
                    out.setdefault(str(key).rsplit(".", 1)[-1].lower(), inner)
    return out


def parameters_from_mapping(data: Mapping) -> dict[str, float]:
    """The model parameters found in ``data`` (see the module docstring), in SI units."""
    flat = _flatten(data)
    found: dict[str, float] = {}
    for name, spellings in _KEYS.items():
        for key, scale in spellings:
            value = flat.get(key)
            if value is None or isinstance(value, bool) or (
                    isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
                continue
            try:
                found[name] = float(value) * scale
            except (TypeError, ValueError):
                raise ValueError(f"parameter {key!r} is not a number: {value!r}") from None
            break
    return found


def system_parameters(n_servers: int, *, preset: str | None = None,
                      file: str | Path | None = None, **given: float | None) -> SystemParameters:
    """SystemParameters for a profile over ``n_servers`` servers: a preset, then a JSON file,
    then explicit values (``t_f``, ``t_c`` seconds; ``bandwidth`` bytes/s;
    ``message_size`` bytes; ``load_factor``), each overriding the previous."""
    base = PRESETS[preset] if preset else SystemParameters(n_servers=n_servers)
    values = {"t_f": base.t_f, "t_c": base.t_c, "bandwidth": base.bandwidth,
              "message_size": base.message_size, "load_factor": base.load_factor}
    if file is not None:
        data = json.loads(Path(file).read_text())
        if not isinstance(data, Mapping):
            raise ValueError(f"{file}: expected a JSON object")
        values.update(parameters_from_mapping(data))
    values.update({k: v for k, v in given.items() if v is not None})
    if values["bandwidth"] is None and values["message_size"] is not None:
        values["message_size"] = None
    if values["message_size"] is None and values["bandwidth"] is not None:
        raise ValueError("a bandwidth needs a message size (S_m)")
    return SystemParameters(n_servers=n_servers, t_f=values["t_f"], t_c=values["t_c"],
                            bandwidth=values["bandwidth"], message_size=values["message_size"],
                            load_factor=values["load_factor"])


# -- the choice -------------------------------------------------------------------------------

def crossing(params: SystemParameters, curve: list[Prediction]) -> dict | None:
    """Where TP_D meets TP_OL between two profiled precisions (T_d and R taken linear in
    precision between them): the paper's optimal operating point, eq. (5).  None if the
    curves do not cross inside the profiled range or there is no link limit."""
    if not params.bandwidth:
        return None
    points = sorted((pr for pr in curve if pr.point.precision is not None),
                    key=lambda pr: pr.point.precision)
    n = params.n_servers

    def gap(t_d: float, r: float) -> float:  # TP_D denominator - TP_OL denominator
        return params.t_f + n * t_d + params.t_c * r * n - r * params.message_size * n / params.bandwidth

    for low, high in zip(points, points[1:]):
        g0 = gap(low.point.t_d, low.point.hit_ratio)
        g1 = gap(high.point.t_d, high.point.hit_ratio)
        if g0 == 0 or g0 * g1 < 0:
            w = 0.0 if g0 == 0 else g0 / (g0 - g1)
            precision = low.point.precision + w * (high.point.precision - low.point.precision)
            t_d = low.point.t_d + w * (high.point.t_d - low.point.t_d)
            r = low.point.hit_ratio + w * (high.point.hit_ratio - low.point.hit_ratio)
            throughput = 1.0 / (params.t_f + n * t_d + params.t_c * r * n)
            return {"precision": precision, "t_d": t_d, "hit_ratio": r, "throughput": throughput}
    return None


def _finite(x: float) -> float | None:
    return None if x is None or math.isinf(x) or math.isnan(x) else x


def recommend(profile: Profile, params: SystemParameters) -> dict:
    """The precision with the highest predicted throughput, and the curve behind it."""
    points = profile.operating_points()
    if params.n_servers != len(profile.servers):
        params = replace(params, n_servers=len(profile.servers))
    curve = predict_curve(params, points)
    best = optimal(params, points)
    precise = next((pr for pr in curve if pr.point.precision == 1.0), None)
    none = next((pr for pr in curve if pr.point.precision is None), None)
    chosen = best.point.precision
    out: dict[str, Any] = {
        "format": RECOMMENDATION_FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "initial_precision": "none" if chosen is None else chosen,
        "predicted_throughput": _finite(best.throughput),
        "bottleneck": best.bottleneck,
        "hit_ratio": best.point.hit_ratio,
        "t_d_seconds": best.point.t_d,
        "parameters": {"n_servers": params.n_servers, "t_f": params.t_f, "t_c": params.t_c,
                       "bandwidth_bytes_per_s": params.bandwidth,
                       "message_size_bytes": params.message_size, "t_l": params.t_l,
                       "load_factor": params.load_factor},
    }
    if precise is not None:
        out["rtp_vs_precise"] = best.throughput / precise.throughput
    if none is not None:
        out["rtp_vs_none"] = best.throughput / none.throughput
    cross = crossing(params, curve)
    if cross is not None:
        out["crossing"] = cross
        if precise is not None:
            out["crossing"]["rtp_vs_precise"] = cross["throughput"] / precise.throughput
            if params.t_l:
                # eq. (1)/(5): RTP_p^o = T_dp / (R_o T_l) (exact when T_f = T_c = 0)
                out["crossing"]["rtp_eq5"] = rtp_precise_link(precise.point.t_d,
                                                              cross["hit_ratio"], params.t_l)
    out["curve"] = [{
        "precision": precision_label(pr.point.precision),
        "t_d": pr.point.t_d, "hit_ratio": pr.point.hit_ratio, "t_s": pr.point.t_s,
        "tp_d": _finite(pr.tp_d), "tp_ol": _finite(pr.tp_ol), "tp_s": _finite(pr.tp_s),
        "throughput": _finite(pr.throughput), "bottleneck": pr.bottleneck,
    } for pr in curve]
    out["profile"] = {k: v for k, v in profile.meta.items()}
    return out


# -- files --------------------------------------------------------------------------------------

_COLUMNS = ("precision", "precision_label", "server", "rectangles", "summary_boxes", "events",
            "forwarded", "hit_ratio", "t_d", "t_route", "t_s", "tasks", "strategy")


def write_csv(profile: Profile, path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=_COLUMNS)
        writer.writeheader()
        for record in profile.to_records():
            writer.writerow({k: ("" if record[k] is None else record[k]) for k in _COLUMNS})


def read_csv(path: str | Path) -> Profile:
    """A profile written by :func:`write_csv` (to choose again with other parameters)."""
    from .profile import ProfileRow

    ints = ("rectangles", "summary_boxes", "events", "forwarded", "tasks")
    rows = []
    with open(path, newline="") as handle:
        for record in csv.DictReader(handle):
            values: dict[str, Any] = {}
            for key in _COLUMNS:
                text = record.get(key, "")
                if key in ("precision_label", "server", "strategy"):
                    values[key] = text
                elif text == "":
                    values[key] = None
                else:
                    values[key] = int(text) if key in ints else float(text)
            rows.append(ProfileRow(**values))
    if not rows:
        raise ValueError(f"{path}: no rows")
    return Profile(rows, {"source": {"kind": "profile.csv", "path": str(path)}})


def write_parquet(spark, profile: Profile, path: Path) -> None:
    from pyspark.sql.types import (DoubleType, LongType, StringType, StructField, StructType)

    types = {"precision": DoubleType(), "precision_label": StringType(), "server": StringType(),
             "strategy": StringType(),
             "hit_ratio": DoubleType(), "t_d": DoubleType(), "t_route": DoubleType(),
             "t_s": DoubleType()}
    schema = StructType([StructField(c, types.get(c, LongType()), c in ("precision", "t_s"))
                         for c in _COLUMNS])
    rows = [tuple(record[c] for c in _COLUMNS) for record in profile.to_records()]
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(path))


def plot(recommendation: dict, path: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    curve = [c for c in recommendation["curve"]]
    numeric = [c for c in curve if c["precision"] != "none"]
    xs = [float(c["precision"]) for c in numeric]
    none = next((c for c in curve if c["precision"] == "none"), None)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 7.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    for key, label, style in (("tp_d", "TP_D (dispatcher, eq. 3)", "--"),
                              ("tp_ol", "TP_OL (outgoing link, eq. 4)", ":"),
                              ("tp_s", "TP_S (servers)", "-.")):
        ys = [c[key] for c in numeric]
        if any(y is not None for y in ys):
            top.plot(xs, [y if y is not None else float("nan") for y in ys], style, label=label)
    top.plot(xs, [c["throughput"] for c in numeric], "o-", color="black", lw=2,
             label="TP = min(...)")
    if none is not None and none["throughput"] is not None:
        top.plot([0.0], [none["throughput"]], "s", color="grey", label="no summary (x = 0)")
    chosen = recommendation["initial_precision"]
    if recommendation.get("predicted_throughput"):
        top.plot([0.0 if chosen == "none" else float(chosen)],
                 [recommendation["predicted_throughput"]], "*", ms=16, color="tab:red",
                 label=f"recommended: {chosen}")
    finite = [c["throughput"] for c in curve if c["throughput"]]
    if finite:
        top.set_ylim(0, 1.6 * max(finite))
    top.set_ylabel("predicted throughput (events/s)")
    top.legend(fontsize=8, loc="upper left")
    top.grid(alpha=0.3)
    top.set_title(title or "Predicted throughput vs summary precision")
    bottom.plot(xs, [c["hit_ratio"] for c in numeric], "o-", color="tab:blue")
    bottom.set_ylabel("hit ratio R", color="tab:blue")
    bottom.set_ylim(0, 1.05)
    twin = bottom.twinx()
    twin.plot(xs, [c["t_d"] * 1e6 for c in numeric], "^-", color="tab:orange")
    twin.set_ylabel("T_d (us per event per server)", color="tab:orange")
    bottom.set_xlabel("summary precision (summary boxes / subscription rectangles; 0 = none)")
    bottom.set_xlim(-0.03, 1.03)
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(profile: Profile, params: SystemParameters, out: str | Path, *,
                  spark=None, title: str = "") -> dict:
    """Write the profile, the recommendation and the plot into ``out``; returns the
    recommendation.  Parquet needs ``spark`` (skipped without it)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    recommendation = recommend(profile, params)
    files = {"csv": out / "profile.csv", "recommendation": out / "recommendation.json",
             "plot": out / "throughput.png"}
    write_csv(profile, files["csv"])
    if spark is not None:
        files["parquet"] = out / "profile.parquet"
        write_parquet(spark, profile, files["parquet"])
    plot(recommendation, files["plot"], title)
    recommendation["files"] = {k: str(v) for k, v in files.items()}
    files["recommendation"].write_text(json.dumps(recommendation, indent=2, default=_json))
    return recommendation


def _json(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
