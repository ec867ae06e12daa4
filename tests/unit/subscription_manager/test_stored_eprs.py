"""An endpoint reference as the subscriptions table stores it: an address alone is written
without building its element, byte for byte what lxml writes, and read back without parsing
(both checked against lxml). In process, no socket."""
from __future__ import annotations

import pytest
from lxml import etree

from subscription_manager.store import _EPR_TAG, _dump_epr, _load_epr
from subscription_manager.versions import VERSIONS
from wsframework.addressing import EndpointReference

ADDRESSES = ["http://a.test/n", "http://a.test/b?x=1&y=<2>", "http://h:1/p&amp;", "urn:x",
             "http://a.test/ b", "a&&<<>>;'\"", "http://é.test/", "http://a.test/\tb",
             "http://a.test/\r", "http://a.test/\u2028"]


@pytest.mark.parametrize("version", list(VERSIONS.values()), ids=lambda v: v.name)
@pytest.mark.parametrize("address", ADDRESSES)
def test_an_address_alone_is_stored_as_lxml_writes_it_and_read_back(version, address):
    epr = EndpointReference(address)
    stored = _dump_epr(epr, version)
    assert stored == etree.tostring(epr.to_element(_EPR_TAG, version.wsa))
    assert _load_epr(stored, version) == EndpointReference(address.strip())


def test_reference_parameters_are_stored_by_lxml_and_kept():
    version = VERSIONS["2011"]
    parameter = etree.fromstring('<p:id xmlns:p="urn:p">7</p:id>')
    epr = EndpointReference("http://a.test/n", (parameter,))
    stored = _dump_epr(epr, version)
    assert stored == etree.tostring(epr.to_element(_EPR_TAG, version.wsa))
    assert _load_epr(stored, version) == epr
