"""The ports the tests and the demo give their roles: free, each handed out once, and below
the ephemeral range, where no outgoing connection can take one before the role binds it."""
import socket

from wsframework.ports import _ephemeral_low, free_port


def test_ports_are_free_distinct_and_below_the_ephemeral_range():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(port < _ephemeral_low() for port in ports)
    for port in ports[:20]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))
