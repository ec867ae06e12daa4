"""The dispatcher's settings: typed groups read at construction (unknown keys and bad values
refused), declared on the role factory for ``edn serve``, and the same names in Configure."""
import pytest

from route_manager.dispatcher import DispatcherSettings, build_dispatcher
from route_manager.selftuning import SelfTuningSettings
from wsframework.admin import AdminClient, contracts
from wsframework.exceptions import SoapFault
from wsframework.admission import AdmissionSettings
from wsframework.service import ServiceConfig
from wsframework.settings import SettingsError, UnknownSetting, describe, read_settings
from wsframework.transport import InProcessTransport


def start(tmp_path, **settings):
    transport = InProcessTransport()
    service = build_dispatcher(ServiceConfig("http://d.test", tmp_path, "tok", role="dispatcher",
                                             settings=settings), transport=transport)
    transport.mount("http://d.test", service)
    return service, AdminClient("http://d.test", "tok", transport=transport)


def test_the_role_declares_its_groups_and_every_key_is_listed():
    assert build_dispatcher.settings == (DispatcherSettings, SelfTuningSettings, AdmissionSettings)
    keys = [key for key, _, _ in describe(*build_dispatcher.settings)]
    for key in ("link_mbps", "forward_timeout", "queue_capacity", "batch_max", "overflow_policy",
                "initial_precision", "self_tuning", "backpressure", "backpressure_timeout",
                "monitor_interval", "measure_window", "stats_log_interval", "allow_private",
                "selftuning_threshold", "selftuning_busy_threshold", "selftuning_step"):
        assert key in keys


def test_text_values_are_read_by_type_as_edn_serve_passes_them():
    settings, tuning, admission = read_settings(
        {"link_mbps": 80.0, "self_tuning": False, "allow_private": None,  # the flags
         "initial_precision": "30%", "backpressure": "0", "overflow_policy": "drop-oldest",
         "selftuning_threshold": "0.9", "control_concurrency": "3"}, *build_dispatcher.settings)
    assert admission.control_concurrency == 3 and admission.control_wait == 30.0
    assert settings.link_mbps == 80.0 and settings.self_tuning is False
    assert settings.initial_precision == 0.3 and settings.backpressure == 0
    assert tuning.threshold == 0.9 and tuning.busy_threshold == 0.97


@pytest.mark.parametrize("bad", [
    {"self_tuning": "flase"}, {"overflow_policy": "drop-all"}, {"queue_capacity": "0"},
    {"initial_precision": "2"}, {"link_mbps": "-1"}, {"monitor_interval": "0"},
    {"allow_private": "10.0.0.0/33"}, {"selftuning_step": "0.3"}, {"batch_max": "4097"},
    {"control_concurrency": "-1"}, {"control_wait": "0"}, {"control_concurrency": "two"}])
def test_bad_values_are_refused(bad):
    with pytest.raises(SettingsError):
        read_settings(bad, *build_dispatcher.settings)


def test_the_dispatcher_refuses_an_unknown_setting_when_built(tmp_path):
    with pytest.raises(UnknownSetting):
        start(tmp_path, selftuning_treshold="0.9")


def test_settings_take_effect(tmp_path):
    service, _ = start(tmp_path, link_mbps="0", initial_precision="none", self_tuning="off",
                       backpressure="10", selftuning_interval="4", selftuning_max_interval="8")
    try:
        d = service.dispatcher
        assert d.link_mbps is None and d.precision == 0.0 and d.control.tuner is None
        assert d.backpressure == 10 and d.control.tuning_config.interval == 4.0
    finally:
        service.close()


def test_allow_private_governs_reply_to_and_fault_to(tmp_path):
    """A ReplyTo/FaultTo is chosen by the sender: the dispatcher's URL policy judges it."""
    from wsframework.urlpolicy import UrlRefused
    for settings, allowed in (({}, False), ({"allow_private": "10.0.0.0/8"}, True)):
        service, _ = start(tmp_path, **settings)
        try:
            policy = service.messaging.reply_policy
            if allowed:
                policy.approve("http://10.1.2.3:8080/replies")
            else:
                with pytest.raises(UrlRefused):
                    policy.approve("http://10.1.2.3:8080/replies")
            with pytest.raises(UrlRefused):
                policy.approve("http://169.254.169.254/")
        finally:
            service.close()


def test_configure_takes_the_set_names_and_the_older_dotted_ones(tmp_path):
    service, admin = start(tmp_path, self_tuning="false")

    def configure(**settings):
        return {f.Name: f.Value for f in admin.call(contracts.Configure(Setting=[
            contracts.Figure(Name=k, Value=v) for k, v in settings.items()])).Setting}

    try:
        tuning = service.dispatcher.control
        assert configure(selftuning_threshold="0.7")["selftuning_threshold"] == "0.7"
        assert configure(**{"selftuning.threshold": "0.6"})["selftuning_threshold"] == "0.6"
        assert configure(**{"selftuning-busy-threshold": "0.5"})["selftuning_busy_threshold"] == "0.5"
        assert tuning.tuning_config.threshold == 0.6 and tuning.tuning_config.busy_threshold == 0.5
        assert configure(self_tuning="on", selftuning_with_none="no")["self_tuning"] == "on"
        assert tuning.tuning_config.with_none is False
        for bad in ({"self_tuning": "flase"}, {"selftuning_threshold": "x"},
                    {"selftuning_interval": "20"},  # above max_interval: refused as a whole
                    {"initial_precision": "0.5"}, {"link_mbps": "10"}, {"colour": "blue"}):
            with pytest.raises(SoapFault) as info:
                configure(precision="none", **bad)
            assert info.value.subcode == contracts.FAULT_INVALID_REQUEST
        assert service.dispatcher.precision == 1.0 and tuning.tuning_config.interval == 2.0
    finally:
        service.close()
