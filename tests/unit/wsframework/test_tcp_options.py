"""The cap on TCP's retransmission backoff (wsframework.transport.tcp): the range the kernel
takes, 0 for the kernel's default, and what clients are given. No socket is connected."""
from __future__ import annotations

import pytest

from edn import cli
from wsframework.transport import tcp


@pytest.fixture(autouse=True)
def _restore_cap():
    before = tcp.rto_max_ms()
    yield
    tcp.set_rto_max_ms(before)


def test_the_default_cap_is_the_least_the_kernel_takes():
    assert tcp.rto_max_ms() == tcp.DEFAULT_RTO_MAX_MS == tcp.MIN_RTO_MAX_MS == 1000


@pytest.mark.parametrize("value", [-1, 1, 999, 120_001, 10**9])
def test_a_cap_out_of_the_kernels_range_is_refused(value):
    with pytest.raises(ValueError, match="0 \\(the kernel's default\\) or 1000-120000 ms"):
        tcp.set_rto_max_ms(value)
    assert tcp.rto_max_ms() == tcp.DEFAULT_RTO_MAX_MS


def test_zero_keeps_the_kernels_default_on_every_socket():
    tcp.set_rto_max_ms(0)
    assert tcp.client_socket_options() == []

    class Untouchable:
        def setsockopt(self, *args):
            raise AssertionError("no option may be set")
    assert tcp.cap_retransmit_backoff(Untouchable()) is False


def test_clients_get_the_configured_cap_where_the_kernel_takes_it():
    tcp.set_rto_max_ms(2500)
    options = tcp.client_socket_options()
    if not tcp.rto_cap_supported():
        assert options == []
        pytest.skip("this kernel has no TCP_RTO_MAX_MS (Linux 6.15+)")
    (level, name, value), = options
    assert value == 2500


def test_edn_serve_refuses_a_bad_cap_before_anything_starts(tmp_path):
    with pytest.raises(SystemExit) as caught:
        cli.main(["serve", "source", "--data", str(tmp_path / "d"), "--tcp-rto-max-ms", "500"])
    assert "--tcp-rto-max-ms" in str(caught.value) and "1000-120000" in str(caught.value)
    assert not (tmp_path / "d").exists()
