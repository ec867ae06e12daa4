"""The R-tree engine's id -> number index answers as the dictionary it replaces, through
additions one by one and in batches, removals, re-additions and merges, also when ids share
a hash. In process."""
from __future__ import annotations

import gc
import random
import weakref

import pytest

from matchers import id_index
from matchers.filter_table import FilterTable


def _remove(table: FilterTable, filter_id: str) -> int | None:
    seq = table.seq_of.pop(filter_id, None)
    if seq is not None:
        table.ids[seq] = None  # as the engine does
    return seq


@pytest.mark.parametrize("colliding", [False, True])
def test_the_index_answers_as_a_dictionary_would(monkeypatch, colliding):
    if colliding:  # a handful of hashes for every id: each lookup must tell them apart
        monkeypatch.setattr(id_index, "_hash", lambda s: len(s) % 3 - 1)
    monkeypatch.setattr(id_index.IdIndex, "MERGE_AT", 8)
    rng = random.Random(5)
    table = FilterTable(1)
    model: dict[str, int] = {}
    names = [f"f{i}" + "x" * rng.randrange(3) for i in range(400)]
    for step in range(600):
        op = rng.random()
        if op < 0.5:
            size = rng.choice([1, 1, 2, 5, 40])
            fresh = [n for n in rng.sample(names, min(len(names), size * 2))
                     if n not in model][:size]
            if fresh:
                assert table.seq_of.isdisjoint(fresh)
                seqs = table.new_seqs(fresh).tolist()
                model.update(zip(fresh, seqs))
        elif model:
            gone = rng.choice(sorted(model))
            assert _remove(table, gone) == model.pop(gone)
        probe = rng.sample(names, 10)
        for name in probe:
            assert table.seq_of.get(name) == model.get(name)
            assert (name in table.seq_of) == (name in model)
        assert table.seq_of.isdisjoint(probe) == all(n not in model for n in probe)
        assert len(table.seq_of) == len(model)
        if step % 50 == 0:
            assert list(table.seq_of) == list(model)
            assert list(table.seq_of.items()) == list(model.items())
    assert _remove(table, "never-held") is None
    with pytest.raises(KeyError):
        table.seq_of["never-held"]
    assert table.seq_of.get(7) is None and 7 not in table.seq_of  # not a string


def test_a_large_batch_settles_at_once_and_a_removed_id_can_come_back():
    table = FilterTable(1)
    ids = [f"s{i}" for i in range(10_000)]
    table.new_seqs(ids)
    assert not table.seq_of._recent  # settled: no dictionary entry apiece
    assert table.seq_of["s9999"] == 9999 and table.seq_of.get("s10000") is None
    assert _remove(table, "s5") == 5 and "s5" not in table.seq_of
    (again,) = table.new_seqs(["s5"]).tolist()
    assert again == 10_000 and table.seq_of["s5"] == again
    assert not table.seq_of.isdisjoint(["zz", "s5"]) and table.seq_of.isdisjoint(["zz"])
    assert list(table.seq_of)[-2:] == ["s9999", "s5"]


def test_a_dropped_table_is_freed_without_the_collector():
    """The index reaches its table by a proxy: no cycle keeps a dropped engine's arrays."""
    table = FilterTable(1)
    table.new_seqs([f"s{i}" for i in range(5000)])
    table.new_seqs(["late"])
    freed = weakref.ref(table)
    gc.disable()
    try:
        del table
        assert freed() is None
    finally:
        gc.enable()
