"""Unit tests never touch the network: any socket connect fails loudly."""
import socket

import pytest


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise RuntimeError("unit tests must not open network connections; use InProcessTransport")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
