"""A profile applied to a running dispatcher (``edn profile --apply``): Configure's
``profile`` setting, every hostile value refused with nothing changed, the dispatcher's own
time of applying it, its figures, the self-tuner handed its model, and a restart that
applies it again as stored (in process, no socket)."""
import json
import math

import pytest

from route_manager.dispatcher import build_dispatcher
from route_manager.precision_profile import (MAX_PROFILE_POINTS, MAX_PROFILE_TEXT,
                                             InvalidPrecisionProfile, PrecisionProfile)
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.service import ServiceConfig
from wsframework.transport import InProcessTransport

RECOMMENDATION = {"initial_precision": 0.4, "curve": [
    {"precision": "0.1", "throughput": 900.0, "hit_ratio": 0.9},
    {"precision": "0.4", "throughput": 1500.5},
    {"precision": "1.0", "throughput": 1200.0},
    {"precision": "none", "throughput": 300.0},
    {"precision": "0.7", "throughput": None}]}  # no finite prediction: left out


def _text(**changes) -> str:
    data = {"initial_precision": 0.4, "curve": [[0.1, 900.0], [0.4, 1500.5], ["none", 3.0]],
            "source": "test", "applied_at": None}
    data.update(changes)
    return json.dumps(data)


def test_a_recommendation_becomes_a_profile_that_reads_back_the_same():
    profile = PrecisionProfile.from_recommendation(RECOMMENDATION, "edn profile --out p")
    assert profile.curve == ((0.1, 900.0), (0.4, 1500.5), (1.0, 1200.0), ("none", 300.0))
    assert profile.model() == {0.1: 900.0, 0.4: 1500.5, 1.0: 1200.0, 0.0: 300.0}
    stamped = profile.stamped(1_700_000_000.5)
    assert PrecisionProfile.parse(stamped.to_text()) == stamped


@pytest.mark.parametrize("text", [
    "", "not json", "[]", '"a string"', "NaN",
    _text(extra=1),                                  # an unknown key
    _text(initial_precision=None), _text(initial_precision=2), _text(initial_precision="x"),
    _text(initial_precision=True),
    _text(curve=[]), _text(curve="0.1:5"), _text(curve=[[0.4, 5.0, 1]]), _text(curve=[[0.4]]),
    _text(curve=[[0.4, "5"]]), _text(curve=[[0.4, -1.0]]), _text(curve=[[0.4, True]]),
    _text(curve=[[0.4, 1.0], [0.4, 2.0]]),          # a precision twice
    _text(curve=[[0.1, 1.0]]),                      # no point at the recommended precision
    _text(curve=[[0, 1.0], [0.4, 1.0]]), _text(curve=[[1.5, 1.0], [0.4, 1.0]]),
    _text(curve=[[p / 1000, 1.0] for p in range(1, MAX_PROFILE_POINTS + 1)] + [[0.4, 1.0]]),
    _text(source="x" * 201), _text(source="a\nb"), _text(source=7),
    _text(applied_at=-1), _text(applied_at="yesterday"), _text(applied_at=True),
    _text(source="x" * MAX_PROFILE_TEXT),
    "[" * 5000 + "]" * 5000,                        # nested past the parser's recursion
    _text(initial_precision=10 ** 4000), _text(applied_at=10 ** 4000),
    _text(curve=[[0.4, 10 ** 4000]]), _text(curve=[[10 ** 4000, 1.0], [0.4, 1.0]])])
def test_a_hostile_profile_is_refused(text):
    with pytest.raises(InvalidPrecisionProfile):
        PrecisionProfile.parse(text)


def test_non_finite_numbers_that_python_json_reads_are_refused():
    for literal in ("NaN", "Infinity", "-Infinity"):
        text = _text().replace("1500.5", literal)
        assert not math.isfinite(json.loads(text)["curve"][1][1])
        with pytest.raises(InvalidPrecisionProfile):
            PrecisionProfile.parse(text)
        with pytest.raises(InvalidPrecisionProfile):
            PrecisionProfile.parse(_text().replace('"applied_at": null', f'"applied_at": {literal}'))


def _start(tmp_path, **settings):
    transport = InProcessTransport()
    service = build_dispatcher(ServiceConfig("http://d.test", tmp_path, "tok", role="dispatcher",
                                             settings=settings), transport=transport)
    transport.mount("http://d.test", service)
    return service, AdminClient("http://d.test", "tok", transport=transport)


def _configure(admin, **settings) -> dict:
    return {f.Name: f.Value for f in admin.call(contracts.Configure(Setting=[
        contracts.Figure(Name=k, Value=v) for k, v in settings.items()])).Setting}


def _figures(admin) -> dict:
    return {f.Name: f.Value for f in admin.call(contracts.GetStats(Prefix="profile.")).Figure}


def test_an_applied_profile_is_in_force_stamped_handed_to_the_tuner_and_kept(tmp_path):
    service, admin = _start(tmp_path, self_tuning="true")
    sent = PrecisionProfile.from_recommendation(RECOMMENDATION, "a test").stamped(1.0)
    try:
        assert _figures(admin) == {"profile.on": "0"}
        in_force = _configure(admin, precision="0.4", profile=sent.to_text())
        applied = PrecisionProfile.parse(in_force["profile"])
        # the dispatcher's own time of applying it, not the sender's
        assert applied.applied_at > 1_000_000_000 and applied.curve == sent.curve
        control = service.dispatcher.control
        assert control.precision == 0.4 and control.profile == applied
        assert control.tuner.model == sent.model()
        figures = _figures(admin)
        assert figures["profile.on"] == "1" and figures["profile.initial_precision"] == "0.4"
        assert figures["profile.points"] == "4" and figures["profile.source"] == "a test"
        assert figures["profile.tuner_model"] == "1"
        # a tuner started later gets the model too
        _configure(admin, self_tuning="off")
        assert control.tuner is None and _figures(admin)["profile.tuner_model"] == "0"
        _configure(admin, self_tuning="on")
        assert control.tuner.model == sent.model()
        # an operator's precision after it is not undone when a restart applies it again
        _configure(admin, precision="0.7")
    finally:
        service.close()
    again, admin = _start(tmp_path, self_tuning="true")
    try:
        control = again.dispatcher.control
        assert control.profile == applied and control.precision == 0.7
        assert control.tuner.model == sent.model()
    finally:
        again.close()


def test_a_bad_profile_changes_nothing_not_even_the_precision_sent_with_it(tmp_path):
    service, admin = _start(tmp_path)
    try:
        for bad in ("{", _text(curve=[[0.1, 1.0]]), "x" * (MAX_PROFILE_TEXT + 1),
                    "[" * 5000 + "]" * 5000, _text(applied_at=10 ** 4000)):
            with pytest.raises(SoapFault) as info:
                _configure(admin, precision="0.4", profile=bad)
            assert info.value.subcode == contracts.FAULT_INVALID_REQUEST
        control = service.dispatcher.control
        assert control.profile is None and control.precision == 1.0
        assert _figures(admin) == {"profile.on": "0"}
    finally:
        service.close()
