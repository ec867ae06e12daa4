"""Every namespace and well-known URI the framework speaks, in one place.

Keeping them here (rather than scattered as string literals) is what stops the classic
eventing bugs: mixing WS-Addressing versions, or a typo in a fault name that no test sees.
An application keeps its own namespaces and dialect URIs beside its own code.
"""

# SOAP envelopes
SOAP11 = "http://schemas.xmlsoap.org/soap/envelope/"
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
XML = "http://www.w3.org/XML/1998/namespace"

# WS-Addressing: the 2004/08 member submission (paired with WS-Eventing 2004/08) and the
# W3C 1.0 recommendation (paired with WS-Eventing 2011).
WSA2004 = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
WSA10 = "http://www.w3.org/2005/08/addressing"
WSA2004_ANONYMOUS = WSA2004 + "/role/anonymous"
WSA10_ANONYMOUS = WSA10 + "/anonymous"
WSA10_NONE = WSA10 + "/none"
WSA2004_FAULT_ACTION = WSA2004 + "/fault"
WSA10_FAULT_ACTION = WSA10 + "/fault"
WSAM = "http://www.w3.org/2007/05/addressing/metadata"

# WS-Eventing
WSE2004 = "http://schemas.xmlsoap.org/ws/2004/08/eventing"
WSE2011 = "http://www.w3.org/2011/03/ws-evt"

# WS-Eventing delivery: the 2004/08 push mode, the 2011 formats and wrapped-notify action.
WSE2004_PUSH_MODE = WSE2004 + "/DeliveryModes/Push"
WSE2011_FORMAT_UNWRAP = WSE2011 + "/DeliveryFormats/Unwrap"
WSE2011_FORMAT_WRAP = WSE2011 + "/DeliveryFormats/Wrap"
WSE2011_NOTIFY_ACTION = WSE2011 + "/WrappedSinkPortType/NotifyEvent"

# Filter dialects
XPATH10_DIALECT_2004 = "http://www.w3.org/TR/1999/REC-xpath-19991116"
XPATH10_DIALECT_2011 = WSE2011 + "/Dialects/XPath10"
XPATH20_DIALECT_2011 = WSE2011 + "/Dialects/XPath20"
ACTION_DIALECT_DPWS11 = "http://docs.oasis-open.org/ws-dd/ns/dpws/2009/01/Action"
ACTION_DIALECT_DPWS2006 = "http://schemas.xmlsoap.org/ws/2006/02/devprof/Action"

# This framework's own vocabulary.
ADMIN = "urn:wsframework:admin"
FRAMEWORK = "urn:wsframework"
EVENTING = "urn:wsframework:eventing"  # the 2011 subscription-id reference parameter
MATCHER_XPATH = "urn:wsframework:matchers:xpath"  # the matcher registry's default

# WSDL 1.1 documents (wsdl/): the document, its SOAP 1.1 and 1.2 bindings, XML Schema, and
# the WS-Addressing action attributes (metadata: WSAM above; the older WSDL binding: WSAW).
WSDL11 = "http://schemas.xmlsoap.org/wsdl/"
WSDL11_SOAP11 = "http://schemas.xmlsoap.org/wsdl/soap/"
WSDL11_SOAP12 = "http://schemas.xmlsoap.org/wsdl/soap12/"
XSD = "http://www.w3.org/2001/XMLSchema"
WSAW = "http://www.w3.org/2006/05/addressing/wsdl"


def qname(namespace: str, local: str) -> str:
    """Clark notation, the form lxml uses for tags: ``{namespace}local``."""
    return "{%s}%s" % (namespace, local)
