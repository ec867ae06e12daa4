"""Handing freed memory back to the operating system.

A start that loads a large store allocates far more in passing (rows, parsed filters, the
lists it builds) than it keeps. CPython frees those objects, but glibc keeps the freed heap
pages for reuse, so the process's resident size would stay at its peak: ``malloc_trim(0)``
returns them. (What the start keeps is frozen out of the collector's generations by the
gunicorn worker once the application is built: :mod:`edn.gunicorn`.)

A served process does the same in passing all the time: each request's buffers, parsed
documents and answers are freed when it ends, and under varied traffic (bodies of every
size, hostile ones among them) glibc's free lists grow in holes between live blocks that
its own trimming, which only ever shortens the top of the heap, never reaches.
:class:`HeapKeeper` returns them from time to time, so that a worker's resident size
follows what it holds rather than the worst mix of requests it has served.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import logging
import threading

__all__ = ["LARGE_REQUEST_BYTES", "HeapKeeper", "collection_paused", "free_heap_bytes",
           "limit_heap_arenas", "return_free_memory", "settle_after_large_request", "settle_after_load"]

log = logging.getLogger(__name__)

_libc = None


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc 2.33 and later): totals over every arena."""
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


def _glibc():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
        else:
            if hasattr(_libc, "mallinfo2"):
                _libc.mallinfo2.restype = _MallInfo2
    return _libc


def return_free_memory() -> bool:
    """Hand glibc's free heap pages back to the system; False where there is no glibc
    (musl, macOS), which keeps them."""
    libc = _glibc()
    if not libc:
        return False
    libc.malloc_trim(0)
    return True


#: glibc's mallopt parameter for the most heaps ("arenas") threads allocate from
_M_ARENA_MAX = -8


def limit_heap_arenas(arenas: int = 2) -> bool:
    """Let this process's threads allocate from at most ``arenas`` glibc heaps (by default
    glibc gives each new thread a heap of its own, up to 8 per core); False where there is
    no glibc. Call it before any thread allocates, as the process starts: glibc fixes the
    bound when it first needs a second heap, and forked children inherit it.

    Freed memory stays in the heap that held it, so with a heap per thread, a worker's
    threads each keep their own free lists: a thread-pool worker's resident size grew by
    twice as much under varied traffic as with two. The threads of a Python worker hold the
    GIL for all but system calls, so they seldom allocate at the same moment, and sharing
    two heaps costs them little waiting."""
    libc = _glibc()
    if not libc or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


def free_heap_bytes() -> int | None:
    """Bytes glibc holds free in its heaps (resident or not), or None where that cannot be
    asked (no glibc, or one older than 2.33)."""
    libc = _glibc()
    if not libc or not hasattr(libc, "mallinfo2"):
        return None
    return libc.mallinfo2().fordblks


class HeapKeeper:
    """Every ``interval_s``, returns glibc's free heap pages to the system when its heaps
    hold more than ``free_threshold`` bytes free (every time, where that cannot be asked).

    A trim walks the free lists with the heap locked, a few milliseconds for hundreds of
    megabytes; asking costs far less. Free bytes stay counted as free after a trim (only
    their pages go), so a heap that keeps a lot free is trimmed at every check, and the
    pages its requests touched again since are returned again."""

    def __init__(self, *, interval_s: float = 30.0, free_threshold: int = 16 << 20):
        self.interval_s = interval_s
        self.free_threshold = free_threshold
        self.trims = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self) -> bool:
        """Trim now if the heaps hold more than the threshold free; True if it trimmed."""
        free = free_heap_bytes()
        if free is not None and free <= self.free_threshold:
            return False
        if not return_free_memory():
            return False
        self.trims += 1
        return True

    def start(self) -> "HeapKeeper":
        """Check in a daemon thread (a greenlet in a gevent worker) until :meth:`stop`."""
        if _glibc() and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="heap-keeper", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # never let the keeper take a worker down
                log.exception("returning free heap memory failed")


#: a request body at least this large is handed back at once when it has been answered
LARGE_REQUEST_BYTES = 256 << 10


def settle_after_large_request(body_bytes: int) -> bool:
    """Return the free heap pages once a request of ``body_bytes`` has been answered, if it
    was at least :data:`LARGE_REQUEST_BYTES`; True if it trimmed.

    A parsed document costs several times its text in libxml2's small blocks (a megabyte of
    20,000 small elements, each declaring its namespace, takes 8 MB), and they are free again
    once it is answered, but glibc keeps their pages. Under a fuzz that sent such messages
    among thousands of small ones, a served process's resident size rose by 2-10 MB at each
    (once 32) and stayed there until the :class:`HeapKeeper`'s next check. A trim costs
    0.3-2 ms where parsing such a body costs 20, so it is done at once, where the body size
    says it pays."""
    if body_bytes < LARGE_REQUEST_BYTES:
        return False
    return return_free_memory()


@contextlib.contextmanager
def collection_paused():
    """No automatic garbage collection inside the block (one that was off stays off).

    A start that loads a store makes millions of objects that all live on, and the
    collector, which runs after every few hundred allocations and through everything held
    at each full pass, finds nothing to free among them: 18% of a 100,000-subscription
    load's time, measured. The cycles the load leaves are collected once after it
    (:func:`settle_after_load`)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def settle_after_load() -> None:
    """Collect the cycles the load left, then return the freed memory."""
    gc.collect()
    return_free_memory()
