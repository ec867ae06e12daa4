"""The roles ``edn serve`` can run, each a factory ``(ServiceConfig, **kwargs) -> Service``.

A role is registered by the package that owns it, in the ``edn.roles`` entry-point group
(``source`` and ``server`` by ``subscription_manager``, ``dispatcher`` by
``route_manager``); a third-party package adds a role the same way. A factory declares the
settings it reads as a ``settings`` attribute (a tuple of :class:`wsframework.settings.Settings`
groups), so ``edn serve`` validates ``--set`` before it starts any process.
"""
from __future__ import annotations

import importlib.metadata as _metadata

ENTRY_POINT_GROUP = "edn.roles"


def known_roles() -> dict:
    """Role name -> entry point (not loaded)."""
    return {ep.name: ep for ep in _metadata.entry_points(group=ENTRY_POINT_GROUP)}


def factory(role: str):
    roles = known_roles()
    try:
        entry_point = roles[role]
    except KeyError:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(sorted(roles))}") from None
    return entry_point.load()


def settings_groups(role: str) -> tuple:
    """The :class:`~wsframework.settings.Settings` groups ``role`` reads (may be empty)."""
    return tuple(getattr(factory(role), "settings", ()))


def build(role: str, config, **kwargs):
    return factory(role)(config, **kwargs)
