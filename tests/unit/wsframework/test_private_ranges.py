"""The private ranges an operator allows (wsframework.urlpolicy.private_ranges, the
allow_private setting, edn serve --allow-private) and the refusals that name them."""
from __future__ import annotations

import pytest

from wsframework.settings import parse_ip_ranges
from wsframework.urlpolicy import MAX_PRIVATE_RANGES, UrlPolicy, UrlRefused, private_ranges


def test_ranges_come_comma_separated_repeated_or_both_each_once():
    assert private_ranges("10.77.0.0/24") == ("10.77.0.0/24",)
    assert private_ranges(["10.77.0.0/24, 192.168.5.0/24", "10.77.0.9/24", "fd00::/8"]) == (
        "10.77.0.0/24", "192.168.5.0/24", "fd00::/8")
    assert private_ranges("10.77.0.7") == ("10.77.0.7/32",)  # one host
    assert private_ranges(["", " , "]) == ()
    assert parse_ip_ranges(["10.77.0.0/24,10.78.0.0/24"]) == ("10.77.0.0/24", "10.78.0.0/24")
    assert parse_ip_ranges(None) == ()


@pytest.mark.parametrize("bad, reason", [
    ("10.0.0.0/33", "invalid IP range '10.0.0.0/33'"),
    ("10.77.0.0/24;rm", "invalid IP range"),
    ("10.77.0.0/" + "2" * 80, "too long"),
    ("8.8.8.0/24", "8.8.8.0/24 holds no private address"),
    ("2001:db8::/32", "holds no private address"),
    ("0.0.0.0/0", "loopback"),
    ("127.0.0.0/8", "allow_loopback"),
    ("::1", "allow_loopback"),
    ("169.254.0.0/16", "link-local"),
    ("fe80::/10", "link-local"),
    (",".join(f"10.{k}.0.0/16" for k in range(MAX_PRIVATE_RANGES + 1)), "more than"),
])
def test_a_range_that_cannot_mean_what_it_says_is_refused_naming_the_flag(bad, reason):
    with pytest.raises(ValueError, match="--allow-private") as caught:
        private_ranges(bad)
    assert reason in str(caught.value)
    with pytest.raises(ValueError):
        parse_ip_ranges(bad)


def test_a_refused_private_address_names_itself_and_the_flag_with_its_range():
    policy = UrlPolicy(resolver=lambda *a: [(2, 1, 6, "", ("10.77.0.5", 0))])
    with pytest.raises(UrlRefused) as caught:
        policy.check("http://sink.lab:9090/n")
    assert "10.77.0.5 is a private address" in caught.value.reason
    assert "--allow-private 10.77.0.0/24" in caught.value.reason
    assert "allow_private" in caught.value.reason
    with pytest.raises(UrlRefused, match="--allow-private fd00:1::/64"):
        UrlPolicy().check("http://[fd00:1::5]:9090/n")
    UrlPolicy(allow_private=["10.77.0.0/24"]).check("http://10.77.0.5:9090/n")  # allowed


def test_a_refused_loopback_address_names_the_setting():
    with pytest.raises(UrlRefused) as caught:
        UrlPolicy(allow_loopback=False).check("http://127.0.0.1:9090/n")
    assert "127.0.0.1 is a loopback address" in caught.value.reason
    assert "allow_loopback" in caught.value.reason
