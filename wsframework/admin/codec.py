"""Admin messages to and from XML: :func:`parse_request` / :func:`parse_response` turn a
SOAP body's child (an lxml element) into a contract instance, :func:`render` turns one back
into an element. Anything that does not validate raises :class:`ContractError` (the edge
answers it with the ``FAULT_INVALID_REQUEST`` fault); no spyne exception leaves this module.

Parsing rules
    * The element picks the class (:mod:`.registry`); ``xsi:type`` cannot.
    * A child is matched by its full QName: a contract's fields live in its namespace,
      fields added by an extension in the extension's namespace. Children nobody declared are
      ignored, so a base server accepts requests carrying extensions it does not know
      (spyne itself matches by local name only; we filter the message's children first so
      that, say, ``{urn:vendor}Name`` can never overwrite the topic name; inside a nested
      ``Topic`` of a ListTopicsResponse spyne's local-name matching still applies).
    * Occurrence counts are enforced (a CreateTopic without ``Name`` or with two is
      rejected), and so are the simple types (``FilterCount`` must be an int).
    * Any-XML fields (``Options``) come back as the single element child of the field's
      element (an lxml element) or ``None``; several element children or bare text are
      rejected.
"""
from __future__ import annotations

import copy

from lxml import etree
from spyne import AnyXml, ComplexModel
from spyne.error import Fault
from spyne.protocol.xml import XmlDocument
from .. import ns

from .model import schema
from .registry import contract_for, element_qname

__all__ = ["ContractError", "parse_request", "parse_response", "render"]


class ContractError(ValueError):
    """An admin message that does not validate; ``reason`` says why, for the fault."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Soft validation makes spyne check occurrences and simple types; xsi:type must not let a
# peer pick the class (and would need an Application to look it up).
_PROTOCOL = XmlDocument(validator="soft", parse_xsi_type=False)
_SPYNE_ERRORS = (Fault, ValueError, TypeError, AttributeError, LookupError)


# --- parsing ---------------------------------------------------------------------

def parse_request(element) -> ComplexModel:
    """The contract instance for an admin request element (the SOAP body's child)."""
    return _parse(element, True, "request")


def parse_response(element) -> ComplexModel:
    """The contract instance for an admin response element (client side)."""
    return _parse(element, False, "response")


def _parse(element, request, kind):
    tag = getattr(element, "tag", None)
    cls = contract_for(tag, request=request) if isinstance(tag, str) else None
    if cls is None:
        raise ContractError("%r is not an admin %s" % (tag, kind))
    name = tag.split("}", 1)[1]
    accepted = schema(cls)

    counts = dict.fromkeys(accepted.bounds, 0)
    undeclared = False
    for child in element:
        key = accepted.fields.get(child.tag) if isinstance(child.tag, str) else None
        if key is None:
            undeclared = True
            continue
        counts[key] += 1
        if key in accepted.any_xml:
            _check_any_xml(name, key, child)
    for key, (low, high) in accepted.bounds.items():
        if not low <= counts[key] <= high:
            if counts[key] == 0:
                raise ContractError("%s: %s is required" % (name, key))
            raise ContractError("%s: %s occurs %d times, at most %s allowed"
                                % (name, key, counts[key], high))

    if undeclared:
        element = _declared_only(element, accepted)
    try:
        obj = _PROTOCOL.from_element(None, cls, element)
    except _SPYNE_ERRORS as exc:
        raise ContractError("%s: %s" % (name, getattr(exc, "faultstring", None) or exc)) from None
    for key, (_, high) in accepted.bounds.items():
        if high > 1 and getattr(obj, key, None) is None:
            setattr(obj, key, [])
    return obj


def _check_any_xml(name, key, child):
    elements = [c for c in child if isinstance(c.tag, str)]
    if len(elements) > 1:
        raise ContractError("%s: %s holds %d elements, at most one allowed"
                            % (name, key, len(elements)))
    if not elements and child.text and child.text.strip():
        raise ContractError("%s: %s must hold an element, not text" % (name, key))


def _declared_only(element, accepted):
    """A copy of ``element`` without the children no field declares (extensions)."""
    trimmed = etree.Element(element.tag, nsmap=element.nsmap)
    for child in element:
        if isinstance(child.tag, str) and child.tag in accepted.fields:
            trimmed.append(copy.deepcopy(child))
    return trimmed


# --- rendering -------------------------------------------------------------------

def render(obj) -> etree._Element:
    """The lxml element of a contract instance (its declared contract's element)."""
    cls = type(obj)
    try:
        qname = element_qname(cls)
    except TypeError as exc:
        raise ContractError(str(exc)) from None
    namespace, name = qname[1:].split("}", 1)
    _check_complete(name, obj)
    obj = _with_copied_xml(obj)
    parent = etree.Element("parent", nsmap={"adm": ns.ADMIN})
    try:
        _PROTOCOL.to_parent(None, cls, obj, parent, namespace, name)
    except _SPYNE_ERRORS as exc:
        raise ContractError("%s: %s" % (name, getattr(exc, "faultstring", None) or exc)) from None
    element = parent[0]
    parent.remove(element)
    return element


def _check_complete(name, obj):
    """Required fields present, nested contracts of the declared type, XML fields elements."""
    cls = type(obj)
    members = cls.get_flat_type_info(cls)
    for key, (low, high) in schema(cls).bounds.items():
        value = getattr(obj, key, None)
        values = (value or []) if high > 1 else ([] if value is None else [value])
        if len(values) < low:
            raise ContractError("%s: %s is required" % (name, key))
        member = members[key]
        for item in values:
            if issubclass(member, AnyXml) and not isinstance(item, etree._Element):
                raise ContractError("%s: %s must be an lxml element" % (name, key))
            if issubclass(member, ComplexModel):
                if not isinstance(item, member.__orig__ or member):
                    raise ContractError("%s: %s must be a %s"
                                        % (name, key, member.get_type_name()))
                _check_complete("%s/%s" % (name, key), item)


def _with_copied_xml(obj):
    """spyne moves XML values into the output tree: hand it copies (top level only;
    no contract nests an XML field)."""
    xml_keys = [k for k in schema(type(obj)).any_xml if getattr(obj, k, None) is not None]
    if not xml_keys:
        return obj
    clone = copy.copy(obj)
    for key in xml_keys:
        setattr(clone, key, copy.deepcopy(getattr(obj, key)))
    return clone
