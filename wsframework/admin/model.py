"""How an admin message contract is written: the base class, the field types, and what a
contract class accepts (its schema).

A contract is a spyne ``ComplexModel`` subclass of :class:`Contract`; its fields are
``(name, type)`` pairs in ``_type_info``, built from the types re-exported here, so that code
outside :mod:`wsframework.admin` never imports spyne (spyne 2.14 runs on Python 3.11 but not
3.12+; keeping every spyne import in this package keeps that problem in one place)::

    class Ping(Contract):
        __namespace__ = "urn:example:ping"
        _type_info = [("Text", required(Unicode)), ("Count", optional(Integer32))]
"""
from __future__ import annotations

import functools

from lxml import etree
from spyne import AnyUri, AnyXml, ComplexModel, Integer32, Unicode
from spyne import Boolean as _SpyneBoolean

from ..canonical import canonical_xml

__all__ = ["Contract", "AnyUri", "AnyXml", "Boolean", "Integer32", "Unicode", "required", "optional",
           "repeated", "schema"]


class Boolean(_SpyneBoolean):
    """xs:boolean whose text must be one of its four lexical forms (true, false, 1, 0),
    without surrounding white space: spyne's own reads any other text, "maybe", "yes" or
    " true ", as false."""
    __type_name__ = "boolean"

    @staticmethod
    def validate_string(cls, value):
        return (_SpyneBoolean.validate_string(cls, value)
                and (value is None or value in ("true", "false", "1", "0")))


class Contract(ComplexModel):
    """Base of admin messages: they compare equal field by field (XML fields by canonical
    form). It declares no field, so spyne does not treat it as a base type (it never shows in
    the WSDL, and contracts do not ``extend`` it)."""

    def __eq__(self, other):
        if type(self) is not type(other):
            return NotImplemented
        return _comparable_fields(self) == _comparable_fields(other)

    __hash__ = None


def _comparable_fields(obj):
    fields = {}
    for key in type(obj).get_flat_type_info(type(obj)):
        value = getattr(obj, key, None)
        if isinstance(value, etree._Element):
            value = canonical_xml(value)
        fields[key] = value
    return fields


def required(field_type):
    """Exactly one occurrence, not nil."""
    return field_type(min_occurs=1, nillable=False)


def optional(field_type):
    """At most one occurrence, not nil."""
    return field_type(nillable=False)


def repeated(field_type, **constraints):
    """Any number of occurrences (a list on the contract), none nil."""
    return field_type.customize(max_occurs="unbounded", nillable=False, **constraints)


class Schema:
    """What a contract class accepts, computed once per class (:func:`schema`)."""

    def __init__(self, cls):
        self.fields = {}  # child QName -> field name
        self.bounds = {}  # field name -> (min_occurs, max_occurs)
        self.any_xml = set()
        klass = cls
        while klass is not None:  # a field lives in the namespace of the class declaring it
            namespace = klass.get_namespace()
            for key in klass._type_info:
                self.fields.setdefault("{%s}%s" % (namespace, key), key)
            klass = klass.__extends__
        for key, member in cls.get_flat_type_info(cls).items():
            attrs = member.Attributes
            self.bounds[key] = (attrs.min_occurs, attrs.max_occurs)
            if issubclass(member, AnyXml):
                self.any_xml.add(key)


@functools.lru_cache(maxsize=None)
def schema(cls) -> Schema:
    return Schema(cls)
