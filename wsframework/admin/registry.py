"""Which contract class parses each admin element, and the element and action of a contract.

The base contracts (:mod:`.contracts`) are declared from the start. Other packages add their
own messages, and applications extend any message, through one function,
:func:`register_contract`:

* **declaring a message**: ``register_contract(Ping, element="{urn:example}Ping")`` (with
  ``request=False`` for a response). The element parses into ``Ping`` and ``Ping`` renders as
  that element. A declaration lasts as long as the process (:func:`reset_contracts` keeps
  it); declaring it again with the same class is allowed, with another class refused.
* **extending a message**: ``register_contract(OwnedCreateTopic)`` for a subclass of a
  declared contract, whose added fields live in the extension's namespace. The element of the
  declared contract now parses into the subclass; the subclass renders under that element.
  One extension per element: a second, unrelated subclass is refused (register a subclass of
  the registered one, or unregister first).

The WS-Addressing action of a message is its element's namespace, ``/`` and its local name
(:func:`action_for`).
"""
from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Mapping

from .. import ns
from .contracts import OPERATIONS
from .model import Contract, schema

__all__ = ["REQUEST_ACTIONS", "RESPONSE_ACTIONS", "action_for", "element_qname",
           "contract_for", "register_contract", "register_operation", "unregister_contract",
           "reset_contracts"]


def action_for(name: str, namespace: str = ns.ADMIN) -> str:
    """The WS-Addressing action of an admin message: ``namespace + "/" + name``."""
    if not name or "/" in name or "}" in name:
        raise ValueError("action_for() wants a message name such as 'CreateTopic', got %r"
                         % (name,))
    return "%s/%s" % (namespace, name)


def _base_table(contracts) -> dict[str, type]:
    return {"{%s}%s" % (ns.ADMIN, cls.get_type_name()): cls for cls in contracts}


_lock = threading.Lock()
# request? -> element QName -> contract: the declared messages, and the ones parsed now
# (declared or extended).
_declared: dict[bool, dict[str, type]] = {
    True: _base_table(req for _, req, _ in OPERATIONS),
    False: _base_table(resp for _, _, resp in OPERATIONS),
}
_current: dict[bool, dict[str, type]] = {kind: dict(table) for kind, table in _declared.items()}
_element_of: dict[type, str] = {cls: qname for table in _declared.values()
                                for qname, cls in table.items()}

REQUEST_ACTIONS: Mapping[str, str] = MappingProxyType(
    {qname: action_for(cls.get_type_name()) for qname, cls in _declared[True].items()})
RESPONSE_ACTIONS: Mapping[str, str] = MappingProxyType(
    {qname: action_for(cls.get_type_name()) for qname, cls in _declared[False].items()})


def element_qname(contract) -> str:
    """The wire element QName of a contract class or instance (its declared contract's)."""
    cls = contract if isinstance(contract, type) else type(contract)
    for base in cls.__mro__:
        qname = _element_of.get(base)
        if qname is not None:
            return qname
    raise TypeError("%r is not an admin message contract" % (cls,))


def contract_for(qname: str, *, request: bool) -> type | None:
    """The class that parses element ``qname`` now (``None``: not an admin message)."""
    return _current[request].get(qname)


def register_contract(cls: type, *, request: bool = True, element: str | None = None) -> type:
    """Declare ``cls`` as the contract of a new ``element`` or, without ``element``, parse
    the element of ``cls``'s declared base contract into ``cls`` from now on.

    ``request=False`` registers a response contract (used by ``parse_response``).
    Registering a class already registered, or a subclass of the registered class, is
    allowed; an unrelated second extension raises ``ValueError``. Returns ``cls`` so it
    can be used as a class decorator.
    """
    if element is not None:
        return _declare(cls, element, request)
    table, declared = _current[request], _declared[request]
    qname = element_qname(cls)
    if qname not in declared:
        raise TypeError("%r is not a %s contract" % (cls, "request" if request else "response"))
    schema(cls)  # fail now, not on the first message, if spyne cannot describe it
    with _lock:
        current = table[qname]
        if not issubclass(cls, current):
            raise ValueError("%s is already extended by %r; unregister it first"
                             % (qname, current))
        table[qname] = cls
    return cls


def register_operation(request: type, response: type) -> tuple[str, type, type]:
    """Declare an admin operation's request and response contracts as elements of the admin
    namespace named after them; returns ``(operation, request, response)``, the form the
    admin WSDL's operation lists take."""
    register_contract(request, element=ns.qname(ns.ADMIN, request.get_type_name()))
    register_contract(response, request=False,
                      element=ns.qname(ns.ADMIN, response.get_type_name()))
    return (request.get_type_name(), request, response)


def _declare(cls, element: str, request: bool) -> type:
    if not (isinstance(cls, type) and issubclass(cls, Contract)):
        raise TypeError("%r is not a wsframework.admin Contract" % (cls,))
    namespace, _, local = element[1:].partition("}")
    if not element.startswith("{") or not namespace:
        raise ValueError("an element is a QName such as '{urn:example}Ping', got %r" % (element,))
    action_for(local, namespace)  # a name an action can be made of
    schema(cls)
    with _lock:
        if _element_of.get(cls, element) != element:
            raise ValueError("%r is already the contract of %s" % (cls, _element_of[cls]))
        for base in cls.__mro__[1:]:
            if base in _element_of:
                raise ValueError("%r extends %s: register it without element="
                                 % (cls, _element_of[base]))
        for kind, table in _declared.items():
            if table.get(element, cls) is not cls or (element in table and kind != request):
                raise ValueError("%s is already declared by %r" % (element, table[element]))
        _declared[request][element] = cls
        _current[request].setdefault(element, cls)
        _element_of[cls] = element
    return cls


def unregister_contract(cls: type) -> None:
    """Undo an extension: the declared contract parses the element again."""
    qname = element_qname(cls)
    with _lock:
        for kind, table in _current.items():
            if table.get(qname) is cls and qname in _declared[kind]:
                table[qname] = _declared[kind][qname]


def reset_contracts() -> None:
    """Forget every extension (for tests); declared messages stay."""
    with _lock:
        for kind, table in _current.items():
            table.clear()
            table.update(_declared[kind])
