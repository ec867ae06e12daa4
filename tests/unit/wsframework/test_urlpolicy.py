"""The URL policy: one strict reading of every URL a peer makes a service contact, the
address judged, the address approved (no DNS: the resolver is injected)."""
from __future__ import annotations

import socket

import pytest

from tests.support.eventing import FakeClock, fake_resolver
from wsframework.transport.http import HttpTransport, _PinnedAdapter
from wsframework.urlpolicy import ApprovedUrl, UrlPolicy, UrlRefused, parse_url


def policy(**kwargs):
    kwargs.setdefault("resolver", fake_resolver())
    return UrlPolicy(**kwargs)


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
        with pytest.raises(UrlRefused):
            check.check_address(address)


def test_private_ranges_only_when_allowed():
    check = policy(allow_private=["10.1.0.0/16", "fd00::/8"])
    check.check_address("10.1.2.3")
    check.check_address("fd12::1")
    with pytest.raises(UrlRefused):
        check.check_address("10.2.0.1")
    with pytest.raises(UrlRefused):  # metadata stays refused inside an allowed range
        policy(allow_private=["fd00::/8", "169.254.0.0/16"]).check_address("fd00:ec2::254")
    with pytest.raises(UrlRefused):
        policy(allow_private=["169.254.0.0/16"]).check_address("169.254.169.254")


def test_loopback_can_be_refused():
    with pytest.raises(UrlRefused, match="loopback"):
        policy(allow_loopback=False).check("http://127.0.0.1:8080/n")


def test_invalid_allow_private_is_an_error():
    with pytest.raises(ValueError):
        UrlPolicy(allow_private=["not-a-cidr"])


@pytest.mark.parametrize("url", ["ftp://example.org/x", "file:///etc/passwd", "/relative",
                                 "http:///nohost", "gopher://h/", "http://h:99999/"])
def test_unusable_urls(url):
    with pytest.raises(UrlRefused):
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
        with pytest.raises(UrlRefused):
            check.check(url)
    assert calls == ["ok.example", "mixed.example", "meta.example", "broken.example"]


def test_answers_are_cached_for_the_ttl():
    table = {"flip.example": "93.184.216.34"}
    calls = []
    clock = FakeClock(0)
    check = UrlPolicy(resolver=fake_resolver(table, calls), cache_ttl=10, clock=clock)
    check.check("http://flip.example/")
    table["flip.example"] = "169.254.169.254"
    check.check("http://flip.example/")  # cached
    assert calls == ["flip.example"]
    clock.advance(11)
    with pytest.raises(UrlRefused):
        check.check("http://flip.example/")
    with pytest.raises(UrlRefused):  # refusals are cached too
        check.check("http://flip.example/")
    assert calls == ["flip.example"] * 2


def test_ip_literals_are_not_resolved():
    calls = []
    check = policy(resolver=fake_resolver({}, calls))
    check.check("http://127.0.0.1:9/")
    check.check("http://[::1]:9/")
    assert calls == []


# -- the reproducers: URLs two parsers read differently are refused, not guessed at ---------
@pytest.mark.parametrize("url", [
    "http://169.254.169.254\\@127.0.0.1:8080/",   # urllib.parse: 127.0.0.1; urllib3: metadata
    "http://127.0.0.1:8080\\@8.8.8.8/",           # the reverse
    "http://127.0.0.1\\sink/",
    "http://user:secret@sink.test/n",              # credentials
    "http://@sink.test/n",
    "http://sink.test@169.254.169.254/",
    "http://sink.test /n", "http://sink.test/n x", " http://sink.test/", "http://sink.test/\t",
    "http://sink.test\n/", "http://sink.test/\r\nX-Injected: 1", "http://sink\x00.test/",
    "http://sink.test/\x7f", "http://sink.test/\u00a0", "http://sink\u3002test/",
    "http://b\u00fccher.example/",                 # non-ASCII host: IDNA-encode it
    "http://xn--zz.example/",                      # not a valid IDNA label
    "http://%31%32%37.0.0.1/", "http://127.0.0.1%2f@x/",   # percent-encoded host
    "http://[fe80::1%25eth0]/",                   # IPv6 zone
    "http:///n", "http://:8080/", "http://?x", "http://#x",  # empty host
    "http://sink.test:0/", "http://sink.test:65536/", "http://sink.test:99999/",
    "http://sink.test:+80/", "http://sink.test:/", "http://sink.test:8o/",
    "http://sink..test/", "http://sink.test./", "http://-sink.test/",
    "http:/sink.test/", "sink.test/n", "//sink.test/n", "ftp://sink.test/",
    "http://[::1/", "http://[::1]x/", "http://[not-ipv6]/",
    "http://2130706433/", "http://0x7f.1/", "http://0x7f000001/", "http://0177.0.0.1/",
    "http://127.1/", "http://127.0.0.01/", "http://1.2.3.4.5/", "http://256.0.0.1/",
    "http://example.0x10/", "http://a.123/",
])
def test_ambiguous_urls_are_refused(url):
    with pytest.raises(UrlRefused):
        policy().approve(url)


def test_long_urls_are_refused_and_the_limit_is_configurable():
    url = "http://sink.test/" + "a" * 2100
    with pytest.raises(UrlRefused, match="exceeds"):
        policy().approve(url)
    with pytest.raises(UrlRefused, match="exceeds"):
        policy().approve("http://sink.test/" + "a" * 3_500_000)
    assert policy(max_length=4096).approve(url) == url
    with pytest.raises(UrlRefused):
        policy(max_length=20).approve("http://sink.test/abcdef")


@pytest.mark.parametrize("url,host,port,target,address", [
    ("http://sink.test/n", "sink.test", 80, "/n", "93.184.216.34"),
    ("HTTPS://Sink.Test:8443/a/b?x=1#frag", "sink.test", 8443, "/a/b?x=1", "93.184.216.34"),
    ("http://sink.test", "sink.test", 80, "/", "93.184.216.34"),
    ("http://sink.test?q", "sink.test", 80, "/?q", "93.184.216.34"),
    ("http://127.0.0.1:8080/n", "127.0.0.1", 8080, "/n", "127.0.0.1"),
    ("http://[::1]:9/", "::1", 9, "/", "::1"),
    ("http://[2606:2800:220:1:248:1893:25c8:1946]/", "2606:2800:220:1:248:1893:25c8:1946", 80,
     "/", "2606:2800:220:1:248:1893:25c8:1946"),
    ("http://xn--bcher-kva.example/", "xn--bcher-kva.example", 80, "/", "93.184.216.34"),
    ("http://sink_1.test:1/", "sink_1.test", 1, "/", "93.184.216.34"),
    ("http://sink.test/p%20q", "sink.test", 80, "/p%20q", "93.184.216.34"),
])
def test_approved_urls_carry_their_reading(url, host, port, target, address):
    approved = policy().approve(url)
    assert isinstance(approved, ApprovedUrl) and approved == url
    assert (approved.parsed.host, approved.parsed.port, approved.parsed.target) == (host, port, target)
    assert approved.address == address


@pytest.mark.parametrize("url", ["http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]:8/",
                                 "http://127.0.0.1/", "http://[::1]/", "http://localhost/"])
def test_loopback_in_every_spelling_follows_allow_loopback(url):
    resolver = fake_resolver({"localhost": ["127.0.0.1", "::1"]})
    policy(resolver=resolver).approve(url)
    with pytest.raises(UrlRefused, match="loopback"):
        policy(resolver=resolver, allow_loopback=False).approve(url)


@pytest.mark.parametrize("url", ["http://[::ffff:169.254.169.254]/", "http://[fd00:ec2::254]/",
                                 "http://[::ffff:10.0.0.1]/", "http://[ff02::1]/", "http://[::]/",
                                 "http://0.0.0.0/", "http://169.254.169.254/latest/meta-data/"])
def test_ipv6_and_ipv4_literals_are_judged(url):
    with pytest.raises(UrlRefused):
        policy().approve(url)


def test_dns_rebinding_cannot_move_an_approved_connection():
    """The resolver answers a public address first, the metadata address after: the approved
    URL keeps the address that was checked, and the transport connects there."""
    answers = iter(["93.184.216.34", "169.254.169.254"])
    calls = []

    def rebinding(host, port, family=0, type=0, proto=0, flags=0):
        calls.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    check = UrlPolicy(resolver=rebinding, cache_ttl=0)
    approved = check.approve("https://rebind.test:8443/n?x")
    assert approved.address == "93.184.216.34"
    assert approved.pinned_url == "https://93.184.216.34:8443/n?x"
    assert approved.parsed.host_header == "rebind.test:8443"
    with pytest.raises(UrlRefused):  # a new approval sees the new answer and refuses it
        check.approve("https://rebind.test:8443/n?x")
    assert calls == ["rebind.test", "rebind.test"]
    assert approved.address == "93.184.216.34"


def test_the_transport_connects_to_the_approved_address_with_the_urls_name(monkeypatch):
    """No socket: the connection pool the transport picks is inspected instead."""
    approved = policy().approve("https://sink.test/n")
    transport = HttpTransport()
    seen = {}

    def fake_send(self, request, **kwargs):
        seen["url"] = request.url
        seen["host"] = request.headers.get("Host")
        seen["authorization"] = request.headers.get("Authorization")
        pool = self.get_connection_with_tls_context(request, True)
        seen["pool"] = (pool.host, pool.port, pool.conn_kw.get("server_hostname"),
                        pool.assert_hostname)
        raise ConnectionRefusedError("stop here")

    monkeypatch.setattr(_PinnedAdapter, "send", fake_send)
    with pytest.raises(ConnectionRefusedError):
        transport.post(approved, b"<x/>", "application/soap+xml")
    assert seen["url"] == "https://93.184.216.34:443/n"
    assert seen["host"] == "sink.test"
    assert seen["authorization"] is None
    assert seen["pool"] == ("93.184.216.34", 443, "sink.test", "sink.test")


def test_the_transport_never_sends_url_credentials(monkeypatch):
    transport = HttpTransport()
    seen = {}

    def fake_send(self, request, **kwargs):
        seen["authorization"] = request.headers.get("Authorization")
        raise ConnectionRefusedError("stop here")

    monkeypatch.setattr(_PinnedAdapter, "send", fake_send)
    with pytest.raises(ConnectionRefusedError):
        transport.post("http://user:secret@peer.test/admin", b"<x/>", "application/soap+xml")
    assert seen == {"authorization": None}


def test_parse_url_is_the_policys_grammar():
    parsed = parse_url("http://Sink.Test:8080/n")
    assert (parsed.scheme, parsed.host, parsed.port, parsed.host_header) == \
        ("http", "sink.test", 8080, "sink.test:8080")
    assert parse_url("https://[::1]/").host_header == "[::1]"
