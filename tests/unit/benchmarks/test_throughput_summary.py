"""The throughput benchmark's summary (benchmarks.reproductions.throughput.summarize) over sweeps where a
level measured nothing: the figures over it are None, not a division by zero."""
from benchmarks.reproductions.throughput import summarize


def row(precision: float, measured: float, predicted: float) -> dict:
    return {"precision": precision, "label": str(precision), "tp_measured": measured,
            "tp_predicted": predicted}


def test_a_level_that_measured_nothing_gives_no_ratio_over_it():
    figures = summarize([row(0.0, 0.0, 50.0), row(0.5, 200.0, 150.0), row(1.0, 100.0, 100.0)])
    assert figures["optimal_precision"] == "0.5" and figures["interior_optimum"]
    assert figures["optimum_vs_none"] is None
    assert figures["optimum_vs_precise"] == 2.0
    assert figures["prediction_error_median"] == 0.125  # median of 0.25 and 0.0


def test_a_sweep_that_measured_nothing_has_no_prediction_error():
    figures = summarize([row(0.0, 0.0, 50.0), row(1.0, 0.0, 100.0)])
    assert figures["optimum_vs_none"] is None and figures["optimum_vs_precise"] is None
    assert figures["prediction_error_median"] is None
