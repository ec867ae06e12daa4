"""The in-process study of the comparing self-tuner under interval noise (edn bench
climbnoise): it runs the real tuner, and the margin it studies makes a difference."""
from benchmarks.reproductions import climb_noise


def test_the_study_runs_the_real_tuner_and_the_keep_margin_tells():
    figures = climb_noise.run(quick=True, keeps=(0.0, 2.0))
    settings = {f"{curve} {setting}" for curve in climb_noise.CURVES
                for setting in climb_noise.SETTINGS}
    for keep in ("keep_0", "keep_2"):
        assert set(figures[keep]) == settings
        for f in figures[keep].values():
            assert 0 < f["p10"] <= f["mean"] <= 1 and 0 <= f["share_at_0_95"] <= 1
        # uniform events: precise is far ahead, and every run ends there
        assert figures[keep]["2Mbps fig16_from_10pct"]["share_at_0_95"] == 1.0
    # the measured flat top after the switch: fewer runs wander off it with the margin
    for link in ("2Mbps", "6.4Mbps"):
        setting = f"{link} fig17_after_change"
        assert figures["keep_2"][setting]["mean"] > figures["keep_0"][setting]["mean"]


def test_a_run_is_a_pure_function_of_its_seed():
    curve = climb_noise.CURVES["slope"]
    one = climb_noise.settled_fraction(curve, "fig17_after_change", 2.0, 0.05, seed=7)
    assert one == climb_noise.settled_fraction(curve, "fig17_after_change", 2.0, 0.05, seed=7)
    assert 0 < one <= 1
