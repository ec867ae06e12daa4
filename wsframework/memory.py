"""Settling a process after a start that loaded much: free memory back to the system, and
what was loaded out of the garbage collector's way.

A start that loads a large store allocates far more in passing (rows, parsed filters, the
lists it builds) than it keeps. CPython frees those objects, but glibc keeps the freed heap
pages for reuse, so the process's resident size would stay at its peak: ``malloc_trim(0)``
returns them. What the start keeps (a subscription's objects, millions of them at a million
subscriptions) lives until its subscription ends; ``gc.freeze()`` moves it out of the
collector's generations, so that a full collection no longer walks all of it (a pause that
grows with the subscriptions held). Frozen objects are still freed when their last
reference goes.
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
    """Collect what the load left, return the freed memory, freeze what it kept."""
    gc.collect()
    return_free_memory()
    gc.freeze()
