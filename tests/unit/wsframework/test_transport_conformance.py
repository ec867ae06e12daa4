"""The transport conformance suite (tests/support/transport_conformance.py) over the
in-process transport; tests/integration/test_transport_http.py runs it over HTTP."""
from __future__ import annotations

import pytest

from tests.support.transport_conformance import CHECKS, EchoEndpoint, TransportSetup
from wsframework.transport import InProcessTransport

BASE = "http://peer.test"


@pytest.fixture
def setup():
    endpoint = EchoEndpoint()
    transport = InProcessTransport()
    transport.mount(BASE, endpoint)
    yield TransportSetup(transport, BASE, "http://nobody.test", endpoint)
    transport.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__[len("check_"):])
def test_in_process_transport(setup, check):
    check(setup)
