"""The source and server roles' settings: one typed mechanism, unknown keys refused."""
from __future__ import annotations

import pytest

from subscription_manager.server import EdnSettings, build_server
from subscription_manager.settings import EventingSettings, parse_seconds
from subscription_manager.source import build_source
from tests.support.eventing import TOKEN, Harness
from wsframework.admission import AdmissionSettings
from wsframework.service import ServiceConfig
from wsframework.settings import SettingsError, UnknownSetting, describe, read_settings


def test_roles_declare_the_groups_they_read():
    assert build_source.settings == (EventingSettings, AdmissionSettings)
    assert build_server.settings == (EdnSettings, EventingSettings, AdmissionSettings)
    keys = [key for key, _, _ in describe(*build_server.settings)]
    assert "dispatcher" in keys and "delivery_retries" in keys


@pytest.mark.parametrize("text, seconds", [
    ("PT2H", 7200.0), ("P1D", 86400.0), ("2.5", 2.5), (30, 30.0), ("P1M", 30 * 86400.0),
    ("none", None), ("unbounded", None), ("", None),
])
def test_lifetimes_are_seconds_or_durations(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-PT1S", "PT", "soon", True])
def test_bad_lifetimes_are_refused(text):
    with pytest.raises(ValueError):
        parse_seconds(text)


def test_eventing_settings_parse_and_validate():
    settings = EventingSettings.from_mapping({"max_expires": "PT1H", "delivery-retries": "5",
                                              "allow_private": "10.0.0.0/8, 192.168.0.0/16",
                                              "keep_subscriptions_on_shutdown": "yes"})
    assert settings.max_expires == 3600.0 and settings.delivery_retries == 5
    assert settings.allow_private == ("10.0.0.0/8", "192.168.0.0/16")
    assert settings.keep_subscriptions_on_shutdown is True
    assert settings.expiry_policy().max_seconds == 3600.0
    for bad in ({"allow_loopback": "ture"}, {"delivery_workers": "0"},
                {"min_expires": "PT1H", "max_expires": "PT1M"}, {"allow_private": "10.0.0.0/33"}):
        with pytest.raises(SettingsError):
            EventingSettings.from_mapping(bad)


def test_the_source_role_refuses_an_unknown_key(tmp_path):
    with pytest.raises(UnknownSetting, match="delivery_retrys"):
        Harness(tmp_path, settings={"delivery_retrys": "5"})


def test_the_source_role_refuses_server_keys(tmp_path):
    with pytest.raises(UnknownSetting, match="dispatcher"):
        Harness(tmp_path, settings={"dispatcher": "http://d.test"})


def test_the_server_mapping_holds_both_groups():
    mapping = {"dispatcher": "http://d.test/", "partitioner": "KMeans", "load_threshold": "7",
               "allow_private": [], "delivery_retries": "1"}
    edn, eventing, _ = read_settings(mapping, *build_server.settings)
    assert (edn.dispatcher, edn.partitioner, edn.load_threshold) == ("http://d.test", "kmeans", 7)
    assert eventing.delivery_retries == 1
    named = EdnSettings.from_mapping(mapping, "http://s1.test:8081")
    assert named.name == "s1.test:8081"
    assert EdnSettings.from_mapping({**mapping, "name": "n"}, "http://s1.test").name == "n"
    with pytest.raises(UnknownSetting, match="delivery_retrys"):
        EdnSettings.from_mapping({**mapping, "delivery_retrys": "1"}, "http://s1.test")
    for bad in ({"partitioner": "nope"}, {"routing_precision": "0"}, {"dispatcher": ""},
                {"control_concurrency": "-2"}, {"control_wait": "-1"}):
        with pytest.raises(SettingsError):
            read_settings({**mapping, **bad}, *build_server.settings)


def test_the_server_role_refuses_a_typo_before_it_starts(tmp_path):
    config = ServiceConfig("http://x.test", tmp_path, TOKEN,
                           settings={"dispatcher": "http://d.test", "delivery_retrys": "1"})
    with pytest.raises(UnknownSetting):
        build_server(config, start_background=False)


def test_the_server_role_keeps_subscriptions_on_shutdown_unless_told(tmp_path):
    def server(**settings):
        config = ServiceConfig("http://x.test", tmp_path / str(len(settings)), TOKEN,
                               settings={"dispatcher": "http://d.test", **settings})
        service = build_server(config, start_background=False, start_sweeper=False)
        service.close()
        return service.subscription_manager.settings.keep_subscriptions_on_shutdown
    assert server() is True
    assert server(**{"keep-subscriptions-on-shutdown": "false"}) is False
