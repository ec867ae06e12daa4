"""The R-tree engine keeps the sum of its filters' bounding-box centres (K-means placement's
centroid) as filters come, are replaced and go, by every path they come in. In process."""
from __future__ import annotations

import numpy as np

from matchers import FilterSpec, RTreeMatchingEngine
from matchers.ranges import RANGES_DIALECT
from route_manager.workloads.grid_xml import range_filter, schema_element
from tests.support.edn import random_boxes

D = 3


def _brute(boxes: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[list[float], int]:
    """The sum of the centres of each filter's bounding box, computed here."""
    total = np.zeros(D)
    for lo, hi in boxes.values():
        total += (np.min(lo, axis=0) + np.max(hi, axis=0)) / 2
    return total.tolist(), len(boxes)


def _held(engine) -> tuple[list[float], int]:
    total, count = engine.centre_total()
    return np.round(total, 9).tolist(), count


def test_the_centre_sum_follows_filters_added_replaced_and_removed():
    engine = RTreeMatchingEngine(schema_element(D))
    lo, hi = random_boxes(30, D, seed=5)
    boxes = {}
    engine.add_filters([(f"f{i}", FilterSpec(RANGES_DIALECT, range_filter(lo[i], hi[i])))
                        for i in range(20)])
    boxes.update({f"f{i}": (lo[i:i + 1], hi[i:i + 1]) for i in range(20)})
    for i in range(20, 30):
        engine.add_filter(f"f{i}", FilterSpec(RANGES_DIALECT, range_filter(lo[i], hi[i])))
        boxes[f"f{i}"] = (lo[i:i + 1], hi[i:i + 1])
    two = "(x0 in [1.0, 2.0] and x1 in [1.0, 2.0]) or (x0 in [7.0, 9.0] and x2 in [0.5, 3.0])"
    engine.add_filter("f3", FilterSpec(RANGES_DIALECT, two))  # replaced by two rectangles
    absent = float(engine.schema.null[0])  # a dimension not tested spans absent values too
    boxes["f3"] = (np.array([[1.0, 1.0, absent], [7.0, absent, 0.5]]),
                   np.array([[2.0, 2.0, 10.0], [9.0, 10.0, 3.0]]))
    engine.bulk_load(["b0", "b1"], lo[:2], hi[:2])
    boxes.update({"b0": (lo[0:1], hi[0:1]), "b1": (lo[1:2], hi[1:2])})
    assert _held(engine) == (np.round(_brute(boxes)[0], 9).tolist(), len(boxes))
    for gone in ("f0", "f3", "b1"):
        engine.remove_filter(gone)
        del boxes[gone]
    assert _held(engine) == (np.round(_brute(boxes)[0], 9).tolist(), len(boxes))
    for filter_id in list(boxes):
        engine.remove_filter(filter_id)
    assert engine.centre_total()[0].tolist() == [0.0] * D and engine.centre_total()[1] == 0


def test_filters_loaded_from_packed_forms_count_alike():
    compiled = RTreeMatchingEngine(schema_element(D))
    lo, hi = random_boxes(50, D, seed=6)
    specs = [(f"f{i}", FilterSpec(RANGES_DIALECT, range_filter(lo[i], hi[i]))) for i in range(50)]
    compiled.add_filters(specs)
    loaded = RTreeMatchingEngine(schema_element(D))
    loaded.add_packed_filters([(i, s, compiled.packed_filter(i)) for i, s in specs])
    assert _held(loaded) == _held(compiled)
    assert _held(loaded)[1] == 50
