"""The WSDL 1.1 document of the administration service, generated from the contracts.

spyne builds one document per SOAP version (``wsframework.admin.spyne_wsdl``, since only
the admin package imports spyne); we merge them into one document with a
single port type (``AdminPortType``), a SOAP 1.1 and a SOAP 1.2 binding and a port for
each, then fix what spyne gets wrong for us:

* spyne uses the operation name as ``soapAction``; ours is ``action_for(name)``;
* the port type gains ``wsam:Action`` and ``wsaw:Action`` on input and output, so
  WS-Addressing clients (zeep among them) send the right ``wsa:Action``;
* the ``AdminToken`` header is referenced by the bindings but spyne declares only its
  simple type, so the element declaration is added;
* spyne types any-XML fields (``Options``) as ``xs:anyType``, which zeep fills with the
  text of whatever it is given; they become one ``xs:any`` element, as the contract
  parses them (with zeep: ``Options={"_value_1": lxml_element}``).

The messages are document/literal with the contract as the body element
(``{urn:wsframework:admin}CreateTopic`` with ``Name``, ``Matcher``, ``Options``). The
document describes the base contracts (``wsframework.admin.OPERATIONS``), not application
extensions; a role that answers more operations passes them (the EDN roles pass
``route_manager.protocol.ADMIN_OPERATIONS``).
"""

from __future__ import annotations

import functools

from lxml import etree

from wsframework import ns
from wsframework.admin import (OPERATIONS, AdminToken, action_for, element_qname,
                               spyne_wsdl)

__all__ = ["admin_wsdl", "serve_admin_wsdl"]

SERVICE_NAME = "AdminService"
PORT_TYPE_NAME = "AdminPortType"
_BINDINGS = {  # SOAP binding namespace -> (binding name, port name)
    ns.WSDL11_SOAP11: ("AdminSoap11Binding", "AdminSoap11Port"),
    ns.WSDL11_SOAP12: ("AdminSoap12Binding", "AdminSoap12Port"),
}
# Prefixes whose namespaces appear inside attribute values (QNames), so they must survive
# namespace cleanup even where no element or attribute name uses them.
_KEPT_PREFIXES = ["xs", "tns", "wsdl", "wsdlsoap11", "wsdlsoap12"]


def _w(local):
    return "{%s}%s" % (ns.WSDL11, local)


@functools.lru_cache(maxsize=64)
def admin_wsdl(address: str, operations: tuple = OPERATIONS) -> bytes:
    """The admin WSDL of ``operations`` ((name, request, response) contracts; default the
    base ones) with ``address`` as the location of both ports (cached per address)."""
    soap11 = _spyne_document("1.1", address, operations)
    soap12 = _spyne_document("1.2", address, operations)
    _adopt_soap12(soap11, soap12)
    for binding in soap11.iterfind(_w("binding")):
        _fix_binding(binding)
    _add_actions(soap11.find(_w("portType")), operations)
    _declare_header_element(soap11)
    _any_xml_as_one_element(soap11)
    etree.cleanup_namespaces(soap11, top_nsmap={"wsam": ns.WSAM, "wsaw": ns.WSAW},
                             keep_ns_prefixes=_KEPT_PREFIXES)
    return etree.tostring(soap11, xml_declaration=True, encoding="UTF-8")


def serve_admin_wsdl(service, operations: tuple | None = None) -> None:
    """Answer ``{base}/admin?wsdl`` of ``service`` with :func:`admin_wsdl` of ``operations``
    (default the base ones; roles call this)."""
    operations = tuple(operations or OPERATIONS)
    service.add_wsdl("/admin", lambda path, address: admin_wsdl(address, operations)
                     if path == "/admin" else None)


def _spyne_document(version, address, operations):
    return etree.fromstring(spyne_wsdl(address, version, operations))


def _adopt_soap12(root, soap12_root):
    """Move the SOAP 1.2 binding and port into ``root``; name port type, bindings, ports."""
    port_type = root.find(_w("portType"))
    port_type.set("name", PORT_TYPE_NAME)
    service = root.find(_w("service"))
    service.set("name", SERVICE_NAME)
    last_binding = root.find(_w("binding"))
    last_binding.addnext(soap12_root.find(_w("binding")))
    service.append(soap12_root.find("%s/%s" % (_w("service"), _w("port"))))

    for binding in root.iterfind(_w("binding")):
        binding_name, port_name = _BINDINGS[_soap_ns(binding)]
        port = service.find("%s[@binding='tns:%s']" % (_w("port"), binding.get("name")))
        binding.set("name", binding_name)
        binding.set("type", "tns:" + PORT_TYPE_NAME)
        port.set("name", port_name)
        port.set("binding", "tns:" + binding_name)


def _soap_ns(binding):
    for child in binding:
        if isinstance(child.tag, str) and etree.QName(child).localname == "binding":
            return etree.QName(child).namespace
    raise ValueError("binding without a SOAP binding element")


def _fix_binding(binding):
    soap_ns = _soap_ns(binding)
    for operation in binding.iterfind(_w("operation")):
        operation.find("{%s}operation" % soap_ns).set("soapAction",
                                                      action_for(operation.get("name")))


def _add_actions(port_type, operations):
    responses = {name: element_qname(resp).split("}", 1)[1] for name, _, resp in operations}
    for operation in port_type.iterfind(_w("operation")):
        name = operation.get("name")
        for tag, message in ((_w("input"), name), (_w("output"), responses[name])):
            node = operation.find(tag)
            node.set("{%s}Action" % ns.WSAM, action_for(message))
            node.set("{%s}Action" % ns.WSAW, action_for(message))


def _declare_header_element(root):
    schema = root.find("%s/{%s}schema[@targetNamespace='%s']" % (_w("types"), ns.XSD, ns.ADMIN))
    name = AdminToken.get_type_name()
    if schema.find("{%s}element[@name='%s']" % (ns.XSD, name)) is None:
        etree.SubElement(schema, "{%s}element" % ns.XSD, name=name, type="tns:" + name)


def _any_xml_as_one_element(root):
    for element in root.iter("{%s}element" % ns.XSD):
        if element.get("type") == "xs:anyType":
            del element.attrib["type"]
            sequence = etree.SubElement(etree.SubElement(element, "{%s}complexType" % ns.XSD),
                                        "{%s}sequence" % ns.XSD)
            etree.SubElement(sequence, "{%s}any" % ns.XSD, processContents="lax")
