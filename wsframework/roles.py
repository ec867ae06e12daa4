"""The roles ``edn serve`` can run, each a factory ``(ServiceConfig) -> Service``.

Roles live in the packages above the framework (subscription and route managers); they are
named here as import strings so the framework itself never imports them.
"""
from __future__ import annotations

import importlib

ROLES = {
    "source": "subscription_manager.source:build_source",
    "dispatcher": "route_manager.dispatcher:build_dispatcher",
    "server": "subscription_manager.edn:build_server",
}


def build(role: str, config, **kwargs):
    try:
        target = ROLES[role]
    except KeyError:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(sorted(ROLES))}") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(config, **kwargs)
