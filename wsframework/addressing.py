"""WS-Addressing for both versions in use with WS-Eventing: the 2004/08 member submission and
W3C 1.0 (2005/08). Endpoint references, message addressing headers (parse and build), reply
addressing, and the faults each version names. Pure; no I/O.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lxml import etree

from . import ns
from .canonical import canonical_xml
from .elements import detached
from .exceptions import SoapFault, sender_fault


class WsaVersion(enum.Enum):
    WSA2004 = ns.WSA2004
    WSA10 = ns.WSA10

    @property
    def namespace(self) -> str:
        return self.value

    @property
    def anonymous(self) -> str:
        return ns.WSA2004_ANONYMOUS if self is WsaVersion.WSA2004 else ns.WSA10_ANONYMOUS

    @property
    def fault_action(self) -> str:
        return ns.WSA2004_FAULT_ACTION if self is WsaVersion.WSA2004 else ns.WSA10_FAULT_ACTION

    def q(self, local: str) -> str:
        return ns.qname(self.value, local)

    def is_anonymous(self, address: str | None) -> bool:
        # Both anonymous URIs are accepted whatever the version: clients mix them up often
        # enough, and treating either as "reply on the back channel" is never harmful.
        return address is None or address in (ns.WSA2004_ANONYMOUS, ns.WSA10_ANONYMOUS)

    # Fault subcodes differ by name between the versions.
    @property
    def invalid_header_fault(self) -> str:
        return self.q("InvalidMessageInformationHeader" if self is WsaVersion.WSA2004
                      else "InvalidAddressingHeader")

    @property
    def header_required_fault(self) -> str:
        return self.q("MessageInformationHeaderRequired" if self is WsaVersion.WSA2004
                      else "MessageAddressingHeaderRequired")


def _serialize(elements: Sequence[etree._Element]) -> tuple[bytes, ...]:
    # Exclusive c14n: namespaces merely in scope where a parameter was read do not count.
    return tuple(canonical_xml(e) for e in elements)


@dataclass(frozen=True, eq=False, slots=True)
class EndpointReference:
    """An endpoint reference: an address plus the reference parameters (and, for 2004/08,
    reference properties) a sender must echo as header blocks when it targets the EPR."""

    address: str
    reference_parameters: tuple[etree._Element, ...] = ()
    reference_properties: tuple[etree._Element, ...] = ()

    def __post_init__(self):
        if not isinstance(self.address, str) or not self.address.strip():
            raise ValueError("an endpoint reference needs an address")

    @classmethod
    def plain(cls, address: str) -> "EndpointReference":
        """``EndpointReference(address)``, checked the same way, made slot by slot: the
        frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
        twice the time, and a start makes one per stored subscription."""
        if not isinstance(address, str) or not address.strip():
            raise ValueError("an endpoint reference needs an address")
        epr = object.__new__(cls)
        _SET_ADDRESS(epr, address)
        _SET_PARAMETERS(epr, ())
        _SET_PROPERTIES(epr, ())
        return epr

    def __eq__(self, other):
        if not isinstance(other, EndpointReference):
            return NotImplemented
        return (self.address == other.address
                and _serialize(self.reference_parameters) == _serialize(other.reference_parameters)
                and _serialize(self.reference_properties) == _serialize(other.reference_properties))

    def __hash__(self):
        return hash((self.address, _serialize(self.reference_parameters)))

    @classmethod
    def from_element(cls, element: etree._Element, version: WsaVersion) -> "EndpointReference":
        """Read an EPR (any element whose children are wsa:Address etc.); raise a Sender fault
        with the version's invalid-header subcode when it has no address."""
        address = element.find(version.q("Address"))
        if address is None or not (address.text or "").strip():
            raise SoapFault("Sender", f"endpoint reference {element.tag} has no Address",
                            (version.invalid_header_fault,)
                            + ((version.q("MissingAddressInEPR"),)
                               if version is WsaVersion.WSA10 else ()))
        params = element.find(version.q("ReferenceParameters"))
        props = element.find(version.q("ReferenceProperties")) if version is WsaVersion.WSA2004 else None
        return cls(
            address.text.strip(),
            tuple(detached(p) for p in params if isinstance(p.tag, str)) if params is not None else (),
            tuple(detached(p) for p in props if isinstance(p.tag, str)) if props is not None else (),
        )

    def to_element(self, tag: str, version: WsaVersion) -> etree._Element:
        element = etree.Element(tag, nsmap={"wsa": version.namespace})
        etree.SubElement(element, version.q("Address")).text = self.address
        if self.reference_properties and version is WsaVersion.WSA2004:
            props = etree.SubElement(element, version.q("ReferenceProperties"))
            for p in self.reference_properties:
                props.append(detached(p))
        if self.reference_parameters:
            params = etree.SubElement(element, version.q("ReferenceParameters"))
            for p in self.reference_parameters:
                params.append(detached(p))
        return element

    def header_blocks(self, version: WsaVersion) -> list[etree._Element]:
        """The blocks to add to a message sent to this EPR (WS-Addressing binding rules)."""
        blocks = []
        for p in self.reference_properties + self.reference_parameters:
            block = detached(p)
            if version is WsaVersion.WSA10:
                block.set(version.q("IsReferenceParameter"), "true")
            blocks.append(block)
        return blocks

    def reference_parameter(self, tag: str) -> str | None:
        for p in self.reference_properties + self.reference_parameters:
            if p.tag == tag:
                return (p.text or "").strip()
        return None


def new_message_id() -> str:
    return f"urn:uuid:{uuid.uuid4()}"


@dataclass
class AddressingHeaders:
    """The message addressing properties of one message."""

    version: WsaVersion
    action: str | None = None
    to: str | None = None
    message_id: str | None = None
    relates_to: str | None = None
    reply_to: EndpointReference | None = None
    fault_to: EndpointReference | None = None
    from_: EndpointReference | None = None
    # Header blocks that are not addressing headers: candidates for reference parameters.
    # WSA 1.0 marks them with IsReferenceParameter; 2004/08 does not mark them at all, so the
    # receiver looks them up by name (see :meth:`reference_parameter`).
    other_headers: list[etree._Element] = field(default_factory=list)

    _SINGLE = ("Action", "To", "MessageID", "RelatesTo", "ReplyTo", "FaultTo", "From")

    @classmethod
    def parse(cls, headers: Iterable[etree._Element]) -> "AddressingHeaders | None":
        """Extract addressing headers; None when the message carries none at all."""
        headers = list(headers)
        versions = {etree.QName(h).namespace for h in headers} & {ns.WSA2004, ns.WSA10}
        if not versions:
            return None
        if len(versions) > 1:
            raise sender_fault("the message mixes WS-Addressing 2004/08 and 1.0 headers",
                               ns.qname(ns.WSA10, "InvalidAddressingHeader"))
        version = WsaVersion(versions.pop())
        found: dict[str, etree._Element] = {}
        others = []
        for h in headers:
            q = etree.QName(h)
            if q.namespace == version.namespace and q.localname in cls._SINGLE:
                if q.localname in found:
                    raise _cardinality_fault(version, q.localname)
                found[q.localname] = h
            elif q.namespace != version.namespace:
                others.append(h)

        def text(name):
            element = found.get(name)
            return (element.text or "").strip() if element is not None else None

        def epr(name):
            element = found.get(name)
            return EndpointReference.from_element(element, version) if element is not None else None

        return cls(version, text("Action"), text("To"), text("MessageID"), text("RelatesTo"),
                   epr("ReplyTo"), epr("FaultTo"), epr("From"), others)

    def reference_parameter(self, tag: str) -> str | None:
        """Text of a reference-parameter header block, accepted with or without
        wsa:IsReferenceParameter (clients disagree on whether to add it)."""
        for h in self.other_headers:
            if h.tag == tag:
                return (h.text or "").strip()
        return None

    def to_elements(self) -> list[etree._Element]:
        v = self.version
        out = []

        def add(name, value):
            if value is not None:
                element = etree.Element(v.q(name), nsmap={"wsa": v.namespace})
                element.text = value
                out.append(element)

        add("To", self.to)
        add("Action", self.action)
        add("MessageID", self.message_id)
        add("RelatesTo", self.relates_to)
        for name, ref in (("ReplyTo", self.reply_to), ("FaultTo", self.fault_to), ("From", self.from_)):
            if ref is not None:
                out.append(ref.to_element(v.q(name), v))
        out.extend(self.other_headers)
        return out


def request_headers(version: WsaVersion, to: EndpointReference | str, action: str, *,
                    message_id: str | None = None,
                    reply_to: EndpointReference | None = None) -> list[etree._Element]:
    """Header blocks for a message sent to ``to`` (an EPR's reference parameters included)."""
    epr = to if isinstance(to, EndpointReference) else EndpointReference(to)
    headers = AddressingHeaders(version, action=action, to=epr.address,
                                message_id=message_id or new_message_id(), reply_to=reply_to)
    return headers.to_elements() + epr.header_blocks(version)


def reply_destination(request: AddressingHeaders | None, fault: bool) -> EndpointReference | None:
    """Where a reply (or fault) to ``request`` goes; None means on the HTTP response."""
    if request is None:
        return None
    target = (request.fault_to if fault and request.fault_to is not None else request.reply_to)
    if target is None or request.version.is_anonymous(target.address):
        return None
    return target


def is_none_address(epr: EndpointReference | None) -> bool:
    return epr is not None and epr.address == ns.WSA10_NONE


def reply_headers(request: AddressingHeaders | None, action: str, *,
                  fault: bool = False,
                  default_version: WsaVersion | None = None) -> list[etree._Element]:
    """Headers for the reply to ``request``: To (when not anonymous; 2004/08 always names
    one), Action, a new MessageID, RelatesTo the request's MessageID, and every reference
    parameter (and 2004/08 reference property) of the reply EPR (FaultTo for a fault when
    given, else ReplyTo) as a header block, whether that EPR is anonymous or not
    (WS-Addressing 1.0 Core 3.4 and SOAP binding 2.1: WSA 1.0 marks each block
    ``wsa:IsReferenceParameter="true"``).

    A request without addressing headers gets an addressed reply anyway (it costs nothing and
    lets clients correlate): in ``default_version`` when given, else in the addressing version
    the reply's action belongs to (an action of the 2004/08 submission family, such as the
    2004/08 eventing or addressing fault action, gets WS-Addressing 2004/08), else WSA 1.0."""
    if request is None:
        version = default_version or unaddressed_reply_version(action)
        return AddressingHeaders(version, action=action,
                                 to=version.anonymous if version is WsaVersion.WSA2004 else None,
                                 message_id=new_message_id()).to_elements()
    version = request.version
    destination = reply_destination(request, fault)
    headers = AddressingHeaders(
        version,
        action=action,
        to=destination.address if destination is not None else
        (version.anonymous if version is WsaVersion.WSA2004 else None),
        message_id=new_message_id(),
        relates_to=request.message_id,
    ).to_elements()
    reply_epr = request.fault_to if fault and request.fault_to is not None else request.reply_to
    if reply_epr is not None and not is_none_address(reply_epr):
        headers.extend(reply_epr.header_blocks(version))
    return headers


# the slots' setters, for EndpointReference.plain
_SET_ADDRESS = EndpointReference.address.__set__
_SET_PARAMETERS = EndpointReference.reference_parameters.__set__
_SET_PROPERTIES = EndpointReference.reference_properties.__set__

# Specifications published under this root (WS-Addressing and WS-Eventing 2004/08, ...) pair
# with WS-Addressing 2004/08.
_SUBMISSION_ROOT = ns.WSA2004.rsplit("/", 1)[0] + "/"


def unaddressed_reply_version(action: str | None) -> WsaVersion:
    """The addressing version of a reply to a request that carried no addressing headers:
    2004/08 for an action of the 2004/08 submission family, WSA 1.0 otherwise."""
    if action and action.startswith(_SUBMISSION_ROOT):
        return WsaVersion.WSA2004
    return WsaVersion.WSA10


def action_mismatch(version: WsaVersion | None, action: str | None,
                    announced: str | None) -> SoapFault:
    """wsa:ActionMismatch (WS-Addressing 1.0 SOAP Binding 6.4.1): the action the HTTP request
    announced (SOAPAction, SOAP 1.2's ``action``) is not the message's wsa:Action."""
    version = version or WsaVersion.WSA10
    problem = etree.Element(version.q("ProblemAction"), nsmap={"wsa": version.namespace})
    etree.SubElement(problem, version.q("Action")).text = action or ""
    etree.SubElement(problem, version.q("SoapAction")).text = announced or ""
    return SoapFault("Sender", f"the HTTP request announced the action {announced!r}, the "
                     f"message is {action!r}", (version.q("ActionMismatch"),), (problem,),
                     version.fault_action)


def action_not_supported(version: WsaVersion | None, action: str | None) -> SoapFault:
    version = version or WsaVersion.WSA10
    problem = etree.Element(version.q("ProblemAction"), nsmap={"wsa": version.namespace})
    etree.SubElement(problem, version.q("Action")).text = action or ""
    return SoapFault("Sender", f"the action {action!r} is not supported at this endpoint",
                     (version.q("ActionNotSupported"),), (problem,), version.fault_action)


def header_required(version: WsaVersion, header: str) -> SoapFault:
    problem = etree.Element(version.q("ProblemHeaderQName"), nsmap={"wsa": version.namespace})
    problem.text = f"wsa:{header}"
    return SoapFault("Sender", f"a required addressing header is missing: wsa:{header}",
                     (version.header_required_fault,), (problem,), version.fault_action)


def destination_unreachable(version: WsaVersion | None, to: str | None) -> SoapFault:
    version = version or WsaVersion.WSA10
    return SoapFault("Sender", f"no endpoint at {to!r}",
                     (version.q("DestinationUnreachable"),), (), version.fault_action)


def _cardinality_fault(version: WsaVersion, name: str) -> SoapFault:
    return _invalid_header(version, name, "InvalidCardinality", f"wsa:{name} appears more than once")


def invalid_address(version: WsaVersion | None, name: str, reason: str) -> SoapFault:
    """wsa:InvalidAddressingHeader (WSA 1.0 subsubcode wsa:InvalidAddress) for a header
    ``wsa:name`` whose address cannot be read."""
    return _invalid_header(version or WsaVersion.WSA10, name, "InvalidAddress", reason)


def _invalid_header(version: WsaVersion, name: str, detail_code: str, reason: str) -> SoapFault:
    subcodes = [version.invalid_header_fault]
    if version is WsaVersion.WSA10:  # the 2004/08 submission has no finer codes
        subcodes.append(version.q(detail_code))
    problem = etree.Element(version.q("ProblemHeaderQName"), nsmap={"wsa": version.namespace})
    problem.text = f"wsa:{name}"
    return SoapFault("Sender", reason, subcodes, (problem,), version.fault_action)
