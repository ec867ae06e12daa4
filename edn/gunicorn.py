"""Hosting a role under gunicorn.

The application is built *in each worker after the fork* (no preload): SQLite connections,
thread pools and R-tree indexes must never cross a fork. Workers share state only through
the durable store (see :mod:`wsframework.store`).
"""
from __future__ import annotations

import logging
from typing import Callable

from gunicorn.app.base import BaseApplication

from wsframework.wsgi import WsgiApplication

log = logging.getLogger(__name__)

_services: list = []


def _worker_exit(server, worker):
    # Runs in the worker on graceful shutdown: let components end subscriptions, flush
    # queues and close stores.
    while _services:
        service = _services.pop()
        try:
            service.close()
        except Exception:
            log.exception("service close failed")


class GunicornServer(BaseApplication):
    def __init__(self, factory: Callable[[], object], *, host: str, port: int, workers: int = 1,
                 threads: int = 8, timeout: int = 60, log_level: str = "info"):
        self._factory = factory
        self._options = {
            "bind": f"{host}:{port}",
            "workers": workers,
            "worker_class": "gthread",
            "threads": threads,
            "timeout": timeout,
            "graceful_timeout": 15,
            "keepalive": 30,
            "preload_app": False,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": log_level,
            "limit_request_line": 8190,
            "limit_request_fields": 100,
            "worker_exit": _worker_exit,
            "proc_name": "edn",
        }
        super().__init__()

    def load_config(self):
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self):
        service = self._factory()
        _services.append(service)
        return WsgiApplication(service)
