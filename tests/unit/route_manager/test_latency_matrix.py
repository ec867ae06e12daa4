"""The latency file of distance-aware placement: both formats read, every hostile input
refused with a LatencyFileError that says what is wrong."""
import json

import numpy as np
import pytest

from route_manager import latency_matrix as lm
from route_manager.latency_matrix import LatencyFileError, load_latency, parse_latency

NAMES = ["ny1", "ny2", "ldn1"]
MS = [[0, 2, 70], [2, 0, 71.5], [70, 71.5, 0]]
CSV = ",ny1,ny2,ldn1\nny1,0,2,70\nny2,2,0,71.5\nldn1,70,71.5,0\n"


def as_json(names=NAMES, ms=MS) -> str:
    return json.dumps({"servers": names, "ms": ms})


def refused(text: str, fmt: str, *words: str) -> None:
    with pytest.raises(LatencyFileError) as caught:
        parse_latency(text, fmt)
    for word in words:
        assert word in str(caught.value), str(caught.value)


def test_json_and_csv_read_the_same_matrix(tmp_path):
    (tmp_path / "l.json").write_text(as_json())
    (tmp_path / "l.csv").write_text(CSV)
    (tmp_path / "sniffed").write_text(CSV)
    for name in ("l.json", "l.csv", "sniffed"):
        matrix = load_latency(tmp_path / name)
        assert matrix.names == tuple(NAMES)
        np.testing.assert_array_equal(matrix.ms, np.array(MS, dtype=float))
    assert matrix.distance("ny2", "ldn1") == 71.5
    assert matrix.distance("ny1", "ny1") == 0.0
    assert matrix.distance("ny1", "tokyo", default=99.0) == 99.0
    with pytest.raises(KeyError, match="tokyo"):
        matrix.distance("ny1", "tokyo")
    np.testing.assert_array_equal(matrix.restricted(["ldn1", "ny1"]), [[0, 70], [70, 0]])


def test_too_large_file_is_refused_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(lm, "MAX_BYTES", 64)
    (tmp_path / "big.json").write_text(as_json())
    with pytest.raises(LatencyFileError, match="larger than 64 bytes"):
        load_latency(tmp_path / "big.json")
    refused("x" * 65, "csv", "larger than 64")


def test_too_many_servers_is_refused(monkeypatch):
    monkeypatch.setattr(lm, "MAX_SERVERS", 2)
    refused(as_json(), "json", "3 servers: at most 2")
    refused(CSV, "csv", "more than 2 servers")


def test_unreadable_and_non_utf8_files_are_refused(tmp_path):
    with pytest.raises(LatencyFileError, match="cannot be read"):
        load_latency(tmp_path / "missing.json")
    (tmp_path / "latin.csv").write_bytes(b",caf\xe9\n")
    with pytest.raises(LatencyFileError, match="not UTF-8"):
        load_latency(tmp_path / "latin.csv")


@pytest.mark.parametrize("bad", ["", " ny1", "a,b", "tab\there", "x" * 129, 7, None])
def test_bad_server_names_are_refused(bad):
    refused(as_json(names=[bad, "ny2", "ldn1"]), "json", "bad server name")


def test_duplicate_names_are_refused():
    refused(as_json(names=["ny1", "ny1", "ldn1"]), "json", "duplicate")
    refused(",a,a\na,0,1\na,1,0\n", "csv", "duplicate")


@pytest.mark.parametrize("cell", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_json_constants_are_refused(cell):
    refused('{"servers": ["a", "b"], "ms": [[0, %s], [1, 0]]}' % cell, "json", "not JSON")


@pytest.mark.parametrize("cell", ["nan", "inf", "1e400", "fast", "9" * 40])
def test_non_finite_or_non_numeric_csv_cells_are_refused(cell):
    refused(f",a,b\na,0,{cell}\nb,1,0\n", "csv", "'a' -> 'b'")


@pytest.mark.parametrize("cell", [-1, -0.5, 600_001, 10**30, True, "3", [1], {"ms": 1}])
def test_negative_huge_or_mistyped_json_cells_are_refused(cell):
    refused(as_json(ms=[[0, cell, 1], [1, 0, 1], [1, 1, 0]]), "json", "'ny1' -> 'ny2'")


def test_non_zero_diagonal_is_refused():
    refused(as_json(ms=[[0, 2, 70], [2, 0.5, 71], [70, 71, 0]]), "json", "'ny2' to itself")


@pytest.mark.parametrize("document", [
    {"servers": NAMES, "ms": MS[:2]},                                # a row missing
    {"servers": NAMES, "ms": [row[:2] for row in MS]},               # a column missing
    {"servers": NAMES, "ms": [[0, 2, 70], 5, [70, 71, 0]]},          # a row not a list
    {"servers": NAMES, "ms": {"ny1": [0, 2, 70]}},                   # not a list of rows
    {"servers": [], "ms": []},                                       # no server
    {"servers": NAMES},                                              # no matrix
    {"servers": NAMES, "ms": MS, "extra": 1},                        # an unknown key
    [NAMES, MS],                                                     # not an object
])
def test_wrong_json_shapes_are_refused(document):
    with pytest.raises(LatencyFileError):
        parse_latency(json.dumps(document), "json")


def test_deeply_nested_json_is_refused():
    refused("[" * 100_000 + "]" * 100_000, "json", "not JSON")


@pytest.mark.parametrize("text, words", [
    (",ny1,ny2\nny2,0,2\nny1,2,0\n", ("row name 'ny2'",)),            # rows out of order
    (",ny1,ny2\nny1,0,2\nlondon,2,0\n", ("row name 'london'",)),       # a stranger
    (",ny1,ny2\nny1,0,2\nny2,2,0\nny3,1,1\n", ("row name 'ny3'",)),   # a row too many
    (",ny1,ny2\nny1,0,2\n", ("1 rows for 2 servers",)),                # a row missing
    (",ny1,ny2\nny1,0\nny2,2,0\n", ("expected 2 values",)),            # a short row
    ("ny1,ny2\nny1,0,2\nny2,2,0\n", ("empty cell",)),                  # no corner cell
    ("\n\n", ("empty",)),
])
def test_csv_row_names_and_shapes_must_match_the_header(text, words):
    refused(text, "csv", *words)


def test_unknown_format_is_refused():
    refused(CSV, "xml", "unknown latency format")
