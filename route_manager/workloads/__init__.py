"""Synthetic workloads of the paper's partitioning study (section III-C) and their XML form.

* :mod:`.synthetic`: subscriptions as rectangles and events as points, in numpy arrays
  (uniform, Zipf-like, normal), deterministic for a given seed; its names are re-exported
  here::

      from route_manager import workloads
      mins, maxs = workloads.uniform_rectangles(100_000, 4, seed=1)
      events = workloads.uniform_events(10_000, 4, seed=2)

* :mod:`.grid_xml`: the same workload as XML (a topic schema of numeric attributes
  ``x0..x{d-1}``, events carrying one value each, range filters for rectangles), shared by the
  demo, the benchmarks, the Spark inputs and the tests.
"""
from .synthetic import (HIGH, LOW, as_generator, cell_digits, normal_events, uniform_events,
                        uniform_rectangles, zipf_cells, zipf_events, zipf_ranks, zipf_rectangles)

__all__ = ["LOW", "HIGH", "as_generator", "uniform_rectangles", "uniform_events", "normal_events",
           "zipf_ranks", "zipf_cells", "cell_digits", "zipf_rectangles", "zipf_events"]
