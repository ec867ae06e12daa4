"""The ``source`` role: a standalone WS-Eventing event source."""
from __future__ import annotations

from wsframework.service import Service, ServiceConfig


def build_source(config: ServiceConfig, **kwargs) -> Service:
    service = Service(config, **kwargs)
    return service
