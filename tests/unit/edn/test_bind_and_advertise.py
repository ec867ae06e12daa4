"""Where a role binds and what it advertises (edn.addresses, edn serve): a wildcard bind
without --base-url is refused before anything starts, a bad --base-url is refused with its
reason, and every role gets a gunicorn control socket of its own (or none)."""
from __future__ import annotations

import pytest

from edn import cli
from edn.addresses import (AddressError, MAX_BASE_URL, advertised_base_url, bind_address,
                           is_wildcard)
from edn.gunicorn import MAX_SOCKET_PATH, GunicornServer, control_socket_options
from edn.sink import NotificationSink, sink_url


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "", "0:0::0"])
def test_a_wildcard_bind_without_base_url_is_refused_naming_the_flag(host):
    assert is_wildcard(host)
    with pytest.raises(AddressError, match="--base-url"):
        advertised_base_url(host, 8081, None)


def test_a_wildcard_bind_advertises_the_base_url_it_is_given():
    assert advertised_base_url("0.0.0.0", 8081, "http://10.77.0.2:8081/") == "http://10.77.0.2:8081"
    assert advertised_base_url("10.77.0.2", 8081, None) == "http://10.77.0.2:8081"
    assert advertised_base_url("::1", 8081, None) == "http://[::1]:8081"
    assert advertised_base_url("edn-1.example", 443, "https://edn-1.example") == "https://edn-1.example"
    assert bind_address("::1", 8081) == "[::1]:8081" and bind_address("h", 1) == "h:1"


@pytest.mark.parametrize("url, reason", [
    ("ftp://10.77.0.2:8081", "only http, https"),
    ("10.77.0.2:8081", "not an absolute"),
    ("http://", "no host"),
    ("http://10.77.0.2:0", "out of range"),
    ("http://10.77.0.2:65536", "out of range"),
    ("http://10.77.0.2:80x", "out of range"),
    ("http://user:pw@10.77.0.2:8081", "credentials"),
    ("http://10.77.0.2:8081/edn", "no path"),
    ("http://10.77.0.2:8081/?a=1", "no path"),
    ("http://10.77.0.2:8081#top", "no path"),
    ("http://10.77.0.2 :8081", "whitespace"),
    ("http://0.0.0.0:8081", "no address a peer can reach"),
    ("http://[::]:8081", "no address a peer can reach"),
    ("http://" + "a" * MAX_BASE_URL + ":1", f"at most {MAX_BASE_URL}"),
])
def test_a_bad_base_url_is_refused_with_its_reason(url, reason):
    with pytest.raises(AddressError, match="--base-url") as caught:
        advertised_base_url("127.0.0.1", 8081, url)
    assert reason in str(caught.value)


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_a_port_out_of_range_is_refused(port):
    with pytest.raises(AddressError, match="--port"):
        advertised_base_url("127.0.0.1", port, None)


def test_edn_serve_refuses_a_wildcard_bind_before_it_creates_anything(tmp_path, capsys):
    data = tmp_path / "data"
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "server", "--host", "0.0.0.0", "--port", "8081", "--data", str(data),
                  "--dispatcher", "http://10.77.0.1:8080"])
    assert "--base-url" in str(caught.value) and "edn serve server" in str(caught.value)
    assert not data.exists()
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "source", "--base-url", "http://10.77.0.2:8081/x", "--data", str(data)])
    assert "no path" in str(caught.value) and not data.exists()


def test_serve_help_states_the_bind_default_and_the_base_url(capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 127.0.0.1" in text and "--base-url" in text and "wildcard" in text


@pytest.mark.parametrize("values, reason", [
    (["10.0.0.0/33"], "invalid IP range"),
    (["8.8.8.0/24"], "no private address"),
    (["127.0.0.0/8"], "allow_loopback"),
    (["169.254.0.0/16"], "link-local"),
    ([",".join(f"10.{k}.0.0/16" for k in range(65))], "more than 64"),
])
def test_edn_serve_refuses_a_bad_allow_private_naming_the_flag(tmp_path, values, reason):
    args = ["serve", "source", "--data", str(tmp_path / "d")]
    for value in values:
        args += ["--allow-private", value]
    with pytest.raises(SystemExit) as caught:
        cli.main(args)
    assert "--allow-private" in str(caught.value) and reason in str(caught.value)


def test_allow_private_defaults_to_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(cli.ALLOW_PRIVATE_ENV, "10.77.0.0/24,8.8.8.0/24")
    with pytest.raises(SystemExit) as caught:  # the environment's value is checked as the flag
        cli.main(["serve", "source", "--data", str(tmp_path / "d")])
    assert "8.8.8.0/24 holds no private address" in str(caught.value)


def test_each_role_gets_its_own_control_socket_or_none(tmp_path):
    first = GunicornServer(object, host="127.0.0.1", port=8081,
                           control_socket=tmp_path / "server-8081" / "gunicorn.ctl")
    second = GunicornServer(object, host="127.0.0.1", port=8082,
                            control_socket=tmp_path / "server-8082" / "gunicorn.ctl")
    paths = {server.cfg.control_socket for server in (first, second)}
    assert paths == {str(tmp_path / "server-8081" / "gunicorn.ctl"),
                     str(tmp_path / "server-8082" / "gunicorn.ctl")}
    assert not first.cfg.control_socket_disable
    too_long = tmp_path / ("x" * MAX_SOCKET_PATH) / "gunicorn.ctl"
    assert control_socket_options(too_long) == {"control_socket_disable": True}
    assert control_socket_options(None) == {"control_socket_disable": True}
    assert GunicornServer(object, host="::1", port=1).cfg.control_socket_disable
    assert GunicornServer(object, host="::1", port=1).cfg.bind == ["[::1]:1"]


def test_a_sink_names_the_address_it_binds_or_advertises():
    assert sink_url("10.77.0.5", 9090) == "http://10.77.0.5:9090"
    assert sink_url("0.0.0.0", 9090, "10.77.0.5") == "http://10.77.0.5:9090"
    assert sink_url("::1", 9090) == "http://[::1]:9090"
    with pytest.raises(ValueError, match="advertised_host"):
        sink_url("0.0.0.0", 9090)
    sink = NotificationSink("127.0.0.2", advertised_host="sink.example")  # binds, no connect
    try:
        assert sink.url == f"http://sink.example:{sink.port}"
    finally:
        sink.server.server_close()


def test_advertising_loopback_to_a_dispatcher_elsewhere_is_warned():
    from edn.addresses import loopback_warning
    text = loopback_warning("http://127.0.0.1:8081", ["http://10.77.0.1:8080"])
    assert "loopback" in text and "http://10.77.0.1:8080" in text and "--host" in text
    assert loopback_warning("http://127.0.0.1:8081", ["http://127.0.0.1:8080"]) is None
    assert loopback_warning("http://localhost:8081", ["http://[::1]:8080"]) is None
    assert loopback_warning("http://10.77.0.2:8081", ["http://10.77.0.1:8080"]) is None
    assert loopback_warning("http://127.0.0.1:8081", ["http://root.lab:8080"]) is None  # a name
