"""Whether this process's threads are greenlets."""
from __future__ import annotations

import sys

__all__ = ["threads_are_greenlets"]


def threads_are_greenlets() -> bool:
    """True in a process whose ``threading`` gevent has monkey-patched (gunicorn's gevent
    worker): a "thread" there is a greenlet in the worker's one OS thread, and whatever
    blocks without yielding (a system call, a long computation) holds every request of it."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("threading"))
