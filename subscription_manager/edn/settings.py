"""Settings of the ``server`` role, read from ``ServiceConfig.settings`` (``edn serve server
--dispatcher URL --name N --partitioner P --load-threshold N``, or ``--set KEY=VALUE``).

=====================  =========================  ===============================================
key                    default                    meaning
=====================  =========================  ===============================================
dispatcher             (required)                 the dispatcher's base URL
name                   host:port of the base URL  this server's name in the network
partitioner            rtree                      random | rtree | kmeans | local (never forward)
load_threshold         20000                      servers at or above this load take no more
                                                  placed subscriptions (paper III-A)
summary_interval       0.2                        seconds between route updates (coalescing)
peer_interval          1.0                        seconds between peer exchanges
routing_precision      1.0                        precision of the summary sent to peers
placement_refresh      summary_interval           seconds between rebuilds of the placement
                                                  state when only the content changed
forward_timeout        10.0                       read timeout of a forwarded Subscribe (s)
move_chunk             500                        subscriptions per ImportSubscriptions
placement_seed         --                         seed of the random placement
=====================  =========================  ===============================================

Every other key goes to the base event source (:mod:`subscription_manager.settings`); the
server role defaults ``keep_subscriptions_on_shutdown`` to true (subscriptions belong to
the network and survive a restart of the server holding them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from route_manager.placement import ALGORITHMS

__all__ = ["EdnSettings"]


@dataclass(frozen=True)
class EdnSettings:
    dispatcher: str
    name: str
    partitioner: str = "rtree"
    load_threshold: int = 20_000
    summary_interval: float = 0.2
    peer_interval: float = 1.0
    routing_precision: float = 1.0
    placement_refresh: float | None = None
    forward_timeout: float = 10.0
    move_chunk: int = 500
    placement_seed: int | None = None

    def __post_init__(self):
        if self.partitioner not in ALGORITHMS:
            raise ValueError(f"partitioner must be one of {', '.join(ALGORITHMS)}, "
                             f"not {self.partitioner!r}")
        if self.load_threshold < 1:
            raise ValueError("load_threshold must be >= 1")
        if self.summary_interval < 0 or self.peer_interval <= 0:
            raise ValueError("summary_interval must be >= 0 and peer_interval > 0")
        if not 0 < self.routing_precision <= 1:
            raise ValueError("routing_precision must be in (0, 1]")
        if self.move_chunk < 1:
            raise ValueError("move_chunk must be >= 1")

    @property
    def refresh(self) -> float:
        return self.summary_interval if self.placement_refresh is None else self.placement_refresh

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None, base_url: str) -> "EdnSettings":
        values = {k.replace("-", "_"): v for k, v in (settings or {}).items()
                  if v is not None and v != ""}
        dispatcher = values.get("dispatcher")
        if not dispatcher:
            raise ValueError("the server role needs the dispatcher's URL (--dispatcher URL)")
        converters = {"load_threshold": int, "summary_interval": float, "peer_interval": float,
                      "routing_precision": float, "placement_refresh": float,
                      "forward_timeout": float, "move_chunk": int, "placement_seed": int,
                      "partitioner": lambda v: str(v).strip().lower()}
        kwargs = {"dispatcher": str(dispatcher).rstrip("/"),
                  "name": str(values.get("name") or urlsplit(base_url).netloc or base_url)}
        for key, convert in converters.items():
            if key in values:
                try:
                    kwargs[key] = convert(values[key])
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"setting {key}: {exc}") from None
        return cls(**kwargs)
