"""Handing memory freed after a large start back to the operating system.

A start that loads a large store allocates far more in passing (rows, parsed filters, the
lists it builds) than it keeps. CPython frees those objects, but glibc keeps the freed heap
pages for reuse, so the process's resident size would stay at its peak: ``malloc_trim(0)``
returns them. (What the start keeps is frozen out of the collector's generations by the
gunicorn worker once the application is built: :mod:`edn.gunicorn`.)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc

__all__ = ["return_free_memory", "settle_after_load"]

_libc = None


def return_free_memory() -> bool:
    """Hand glibc's free heap pages back to the system; False where there is no glibc
    (musl, macOS), which keeps them."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    _libc.malloc_trim(0)
    return True


def settle_after_load() -> None:
    """Collect the cycles the load left, then return the freed memory."""
    gc.collect()
    return_free_memory()
