"""Notification target checks (no DNS: the resolver is injected)."""
from __future__ import annotations

import socket

import pytest

from subscription_manager.targets import TargetPolicy, TargetRefused
from tests.support.eventing import FakeClock, fake_resolver


def policy(**kwargs):
    kwargs.setdefault("resolver", fake_resolver())
    return TargetPolicy(**kwargs)


@pytest.mark.parametrize("address,allowed", [
    ("93.184.216.34", True),
    ("2606:2800:220:1:248:1893:25c8:1946", True),
    ("127.0.0.1", True),
    ("127.8.9.10", True),
    ("::1", True),
    ("169.254.169.254", False),   # cloud metadata
    ("169.254.1.1", False),       # link-local
    ("fe80::1", False),
    ("fd00:ec2::254", False),     # AWS IPv6 metadata
    ("100.100.100.200", False),   # Alibaba metadata
    ("10.0.0.5", False),
    ("172.16.0.1", False),
    ("172.31.255.255", False),
    ("172.32.0.1", True),
    ("192.168.1.1", False),
    ("100.64.0.1", False),        # shared address space
    ("fc00::1", False),
    ("fd12:3456::1", False),
    ("224.0.0.1", False),         # multicast
    ("ff02::1", False),
    ("0.0.0.0", False),
    ("::", False),
    ("255.255.255.255", False),
    ("240.0.0.1", False),         # reserved
    ("::ffff:169.254.169.254", False),  # IPv4-mapped metadata
    ("::ffff:10.0.0.1", False),
    ("::ffff:93.184.216.34", True),
])
def test_addresses(address, allowed):
    check = policy()
    if allowed:
        check.check_address(address)
    else:
        with pytest.raises(TargetRefused):
            check.check_address(address)


def test_private_ranges_only_when_allowed():
    check = policy(allow_private=["10.1.0.0/16", "fd00::/8"])
    check.check_address("10.1.2.3")
    check.check_address("fd12::1")
    with pytest.raises(TargetRefused):
        check.check_address("10.2.0.1")
    with pytest.raises(TargetRefused):  # metadata stays refused inside an allowed range
        policy(allow_private=["fd00::/8", "169.254.0.0/16"]).check_address("fd00:ec2::254")
    with pytest.raises(TargetRefused):
        policy(allow_private=["169.254.0.0/16"]).check_address("169.254.169.254")


def test_loopback_can_be_refused():
    with pytest.raises(TargetRefused, match="loopback"):
        policy(allow_loopback=False).check("http://127.0.0.1:8080/n")


def test_invalid_allow_private_is_an_error():
    with pytest.raises(ValueError):
        TargetPolicy(allow_private=["not-a-cidr"])


@pytest.mark.parametrize("url", ["ftp://example.org/x", "file:///etc/passwd", "/relative",
                                 "http:///nohost", "gopher://h/", "http://h:99999/"])
def test_unusable_urls(url):
    with pytest.raises(TargetRefused):
        policy().check(url)


def test_hostnames_are_resolved_and_every_address_must_pass():
    calls = []
    check = policy(resolver=fake_resolver({"ok.example": "93.184.216.34",
                                           "mixed.example": ["93.184.216.34", "10.0.0.1"],
                                           "meta.example": "169.254.169.254",
                                           "broken.example": socket.gaierror("no such host")},
                                          calls), cache_ttl=0)
    check.check("http://ok.example/notify")
    for url in ("http://mixed.example/", "https://meta.example/", "http://broken.example/"):
        with pytest.raises(TargetRefused):
            check.check(url)
    assert calls == ["ok.example", "mixed.example", "meta.example", "broken.example"]


def test_answers_are_cached_for_the_ttl():
    table = {"flip.example": "93.184.216.34"}
    calls = []
    clock = FakeClock(0)
    check = TargetPolicy(resolver=fake_resolver(table, calls), cache_ttl=10, clock=clock)
    check.check("http://flip.example/")
    table["flip.example"] = "169.254.169.254"
    check.check("http://flip.example/")  # cached
    assert calls == ["flip.example"]
    clock.advance(11)
    with pytest.raises(TargetRefused):
        check.check("http://flip.example/")
    with pytest.raises(TargetRefused):  # refusals are cached too
        check.check("http://flip.example/")
    assert calls == ["flip.example"] * 2


def test_ip_literals_are_not_resolved():
    calls = []
    check = policy(resolver=fake_resolver({}, calls))
    check.check("http://127.0.0.1:9/")
    check.check("http://[::1]:9/")
    assert calls == []
