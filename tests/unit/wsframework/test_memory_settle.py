"""Settling after a large load: freed memory handed back, what was kept frozen."""
import gc

from wsframework import memory


def test_settling_freezes_what_is_alive_and_returns_free_memory():
    kept = [[i] for i in range(1000)]
    try:
        memory.settle_after_load()
        assert gc.get_freeze_count() >= len(kept)
        assert memory.return_free_memory() is True  # this machine has glibc
    finally:
        gc.unfreeze()
