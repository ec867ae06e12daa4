"""Settling after a large load, and a served process's heap kept: cycles collected, freed
memory handed back."""
import gc
import os
import time

import pytest

from wsframework import memory


class _Cycle:
    def __init__(self):
        self.me = self


def test_settling_collects_what_the_load_left_in_cycles_and_returns_free_memory():
    gc.disable()
    try:
        for _ in range(100):
            _Cycle()
        assert any(type(o) is _Cycle for o in gc.get_objects())
        memory.settle_after_load()
        assert not any(type(o) is _Cycle for o in gc.get_objects())
        assert memory.return_free_memory() is True  # this machine has glibc
    finally:
        gc.enable()


def _resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _free_in_holes() -> list[bytes]:
    """Frees about 100 MB in holes between kept blocks (glibc's own trimming reaches only
    the top of the heap), and returns the kept blocks."""
    kept, freed = [], []
    for i in range(30_000):
        (kept if i % 10 == 0 else freed).append(bytes(4000))
    del freed
    return kept


@pytest.mark.skipif(memory.free_heap_bytes() is None, reason="needs glibc 2.33 or later")
def test_the_heap_keeper_returns_pages_freed_in_holes_and_leaves_a_heap_with_little_free():
    kept = _free_in_holes()
    assert memory.free_heap_bytes() > 90 << 20
    lenient = memory.HeapKeeper(free_threshold=1 << 40)
    assert lenient.check() is False and lenient.trims == 0
    before = _resident_mb()
    keeper = memory.HeapKeeper(free_threshold=16 << 20)
    assert keeper.check() is True and keeper.trims == 1
    assert before - _resident_mb() > 60, "the free pages stayed resident"
    assert len(kept) == 3_000


@pytest.mark.skipif(memory.free_heap_bytes() is None, reason="needs glibc 2.33 or later")
def test_the_heap_keeper_checks_in_its_own_thread_until_stopped():
    keeper = memory.HeapKeeper(interval_s=0.01, free_threshold=0).start()
    try:
        deadline = time.monotonic() + 10
        while keeper.trims < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert keeper.trims >= 2
    finally:
        keeper.stop()
    keeper._thread.join(5)
    assert not keeper._thread.is_alive()


_COUNT_HEAPS = r"""
import ctypes, sys, threading
from wsframework import memory
if sys.argv[1] == "limit":
    assert memory.limit_heap_arenas(2)
libc = ctypes.CDLL("libc.so.6")
libc.open_memstream.restype = ctypes.c_void_p
libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
start = threading.Barrier(8)

def allocate():
    start.wait()  # all at once, so that glibc would give each a heap of its own
    kept = [bytes(2000) for _ in range(2000)]
    return kept

threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
text, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(text), ctypes.byref(size))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(text.value.decode().count("<heap nr="))
"""


@pytest.mark.skipif(memory.free_heap_bytes() is None, reason="needs glibc 2.33 or later")
def test_limiting_heap_arenas_keeps_a_threaded_process_to_two_heaps():
    import subprocess
    import sys

    def heaps(mode):
        done = subprocess.run([sys.executable, "-c", _COUNT_HEAPS, mode], capture_output=True,
                              text=True, timeout=60, check=True)
        return int(done.stdout.strip())

    assert heaps("limit") <= 2
    assert heaps("default") > 2  # the test can tell: unlimited, the threads take more


@pytest.mark.skipif(memory.free_heap_bytes() is None, reason="needs glibc 2.33 or later")
def test_a_large_request_returns_the_pages_its_parse_freed_and_a_small_one_does_not():
    kept = _free_in_holes()
    before = _resident_mb()
    assert memory.settle_after_large_request(memory.LARGE_REQUEST_BYTES - 1) is False
    assert before - _resident_mb() < 10, "a small request trimmed"
    assert memory.settle_after_large_request(memory.LARGE_REQUEST_BYTES) is True
    assert before - _resident_mb() > 60, "the free pages stayed resident"
    assert len(kept) == 3_000


def test_collection_is_paused_inside_the_block_and_restored_after_even_on_error():
    assert gc.isenabled()
    with memory.collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with memory.collection_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
    gc.disable()
    try:
        with memory.collection_paused():
            pass
        assert not gc.isenabled()  # one that was off stays off
    finally:
        gc.enable()
