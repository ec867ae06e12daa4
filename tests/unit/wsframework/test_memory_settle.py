"""Settling after a large load: cycles collected, freed memory handed back."""
import gc

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
