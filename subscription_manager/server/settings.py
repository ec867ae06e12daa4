"""Settings of the ``server`` role, read from ``ServiceConfig.settings`` (``edn serve server
--dispatcher URL --name N --partitioner P --load-threshold N``, or ``--set KEY=VALUE``).

=====================  =========================  ===============================================
key                    default                    meaning
=====================  =========================  ===============================================
dispatcher             (required)                 the root dispatchers' base URLs: one, a list,
                                                  or comma-separated text (``--dispatcher``
                                                  repeated); ``edn.dispatcher`` is the first
                                                  (the topic address subscribers see),
                                                  ``edn.dispatchers`` all of them
name                   host:port of the base URL  this server's name in the network
partitioner            rtree                      random | rtree | kmeans | distance | local
                                                  (never forward)
latency_file           --                         latency matrix file (``--latency``; JSON or
                                                  CSV, :mod:`route_manager.latency_matrix`),
                                                  required by ``distance``: its names are the
                                                  servers' ``name``; one missing from it counts
                                                  as the farthest. Its cost is added traffic
                                                  x (distance + floor), the floor the setting
                                                  ``placement_distance_floor`` (ms; default the
                                                  smallest non-zero latency from this server)
load_threshold         20000                      servers at or above this load take no more
                                                  placed subscriptions (paper III-A)
summary_interval       0.2                        seconds between route updates (coalescing)
peer_interval          1.0                        seconds between peer exchanges
routing_precision      1.0                        precision of the summary sent to peers
summary_max_bytes      2097152                    largest summary sent to a root; a larger
                                                  one is cut to fit (it still covers every
                                                  subscription, less precisely)
placement_refresh      summary_interval           seconds between rebuilds of the placement
                                                  state when only the content changed
forward_timeout        10.0                       read timeout of a forwarded Subscribe (s)
move_chunk             500                        subscriptions per ImportSubscriptions
placement_seed         --                         seed of the random placement
=====================  =========================  ===============================================

The server's mapping also holds the base event source's settings
(:mod:`subscription_manager.settings`): the manager declares both groups
(``EdnSubscriptionManager.settings_groups``, also the role's ``build_server.settings``) and
the base manager reads the mapping once into them
(``read_settings(mapping, EdnSettings, EventingSettings)``), so a key neither group knows is
refused in that one place. The server role defaults ``keep_subscriptions_on_shutdown`` to true (subscriptions
belong to the network and survive a restart of the server holding them).

The event source's subscription limits (``max_subscriptions``, ``max_subscriptions_per_topic``,
``max_subscriptions_per_host``) hold on each server for what it stores: a Subscribe placed
on a full server is refused there with EventSourceUnableToProcess (2004/08) or a Receiver
fault (2011), relayed to the subscriber by the server that forwarded it. They count per
server, not across the network; subscriptions moved in (ImportSubscriptions) count but are
never refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping
from urllib.parse import urlsplit

from route_manager.latency_matrix import LatencyMatrix, load_latency
from route_manager.placement_router import ALGORITHMS
from wsframework.admission import AdmissionSettings
from wsframework.settings import Settings, parse_urls, read_settings, setting

from ..settings import EventingSettings

__all__ = ["EdnSettings"]


def _partitioner(value: Any) -> str:
    return str(value).strip().lower()


@dataclass(frozen=True)
class EdnSettings(Settings):
    # Parsed to every root's URL; __post_init__ keeps the first here and all in ``dispatchers``.
    dispatcher: str | None = setting(None, "the root dispatchers' base URLs (required; "
                                     "--dispatcher repeated, or comma-separated)", parse=parse_urls)
    name: str | None = setting(None, "this server's name in the network (default: host:port "
                               "of the base URL)")
    partitioner: str = setting("rtree", "random | rtree | kmeans | distance | local (never "
                               "forward)", parse=_partitioner)
    latency_file: str | None = setting(None, "latency matrix file, ms (--latency; required by "
                                       "the distance partitioner)")
    placement_distance_floor: float | None = setting(
        None, "ms added to every distance by the distance partitioner (default: the smallest "
        "non-zero latency from this server; higher: distance counts less)")
    load_threshold: int = setting(20_000, "servers at or above this load take no more placed "
                                  "subscriptions")
    summary_interval: float = setting(0.2, "seconds between route updates (coalescing)")
    peer_interval: float = setting(1.0, "seconds between peer exchanges")
    routing_precision: float = setting(1.0, "precision of the summary sent to peers, (0, 1]")
    # a summary larger than the root's body limit (4 MiB by default) would be refused whole
    summary_max_bytes: int = setting(2 << 20, "largest summary sent to a root (bytes); a "
                                     "larger one is cut to fit")
    placement_refresh: float | None = setting(None, "seconds between placement-state rebuilds "
                                              "when only the content changed (default: "
                                              "summary_interval)")
    forward_timeout: float = setting(10.0, "read timeout of a forwarded Subscribe (seconds)")
    move_chunk: int = setting(500, "subscriptions per ImportSubscriptions")
    placement_seed: int | None = setting(None, "seed of the random placement")
    dispatchers: tuple[str, ...] = field(init=False, default=())  # not a key: see dispatcher

    def __post_init__(self) -> None:
        urls = parse_urls(self.dispatcher)
        object.__setattr__(self, "dispatchers", urls)
        object.__setattr__(self, "dispatcher", urls[0] if urls else None)
        super().__post_init__()

    def validate(self) -> None:
        if not self.dispatcher:
            raise ValueError("the server role needs the dispatcher's URL (--dispatcher URL)")
        if self.partitioner not in ALGORITHMS:
            raise ValueError(f"partitioner must be one of {', '.join(ALGORITHMS)}, "
                             f"not {self.partitioner!r}")
        if self.load_threshold < 1:
            raise ValueError("load_threshold must be >= 1")
        if self.partitioner == "distance" and not self.latency_file:
            raise ValueError("the distance partitioner needs a latency file (--latency FILE)")
        if self.latency_file:
            self.latency()  # a bad file is refused at start, with its reason
        floor = self.placement_distance_floor
        if floor is not None and not 0 <= floor < float("inf"):
            raise ValueError("placement_distance_floor must be finite and >= 0")
        if self.summary_max_bytes < 1024:
            raise ValueError("summary_max_bytes must be at least 1024")
        if self.summary_interval < 0 or self.peer_interval <= 0:
            raise ValueError("summary_interval must be >= 0 and peer_interval > 0")
        if not 0 < self.routing_precision <= 1:
            raise ValueError("routing_precision must be in (0, 1]")
        if self.move_chunk < 1:
            raise ValueError("move_chunk must be >= 1")

    def latency(self) -> LatencyMatrix | None:
        """The latency matrix read from ``latency_file`` (None without one); a bad file
        raises ValueError (:class:`~route_manager.latency_matrix.LatencyFileError`)."""
        return load_latency(self.latency_file) if self.latency_file else None

    @property
    def refresh(self) -> float:
        return self.summary_interval if self.placement_refresh is None else self.placement_refresh

    def named_after(self, base_url: str | None) -> "EdnSettings":
        """These settings, with ``name`` defaulting to the host:port of ``base_url``."""
        if self.name or not base_url:
            return self
        # (replace() rebuilds from the init fields: hand it every root, not just the first)
        return replace(self, name=urlsplit(base_url).netloc or base_url,
                       dispatcher=self.dispatchers)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None,
                     base_url: str | None = None) -> "EdnSettings":
        """The server role's EDN settings from its whole mapping (the event source's keys
        are read too, and a key neither group knows is refused); ``name`` defaults to the
        host:port of ``base_url``. The server itself reads its mapping once, in the base
        manager (``role_settings``); this is for tools and tests."""
        edn, _, _ = read_settings(mapping, cls, EventingSettings, AdmissionSettings)
        return edn.named_after(base_url)
