"""Range extraction from XPath 1.0 filters: the boxes that every accepted event lies in.

The paper's "different formats for filtering and routing": subscribers write XPath, the
engine indexes rectangles.  :func:`extract_constraints` reads an XPath 1.0 expression with
elementpath's ``XPath1Parser`` (a real parse: its token tree, never regular expressions) and
returns a union of boxes, as a list of ``{dimension: Interval}`` (a missing dimension is
unconstrained), such that **every event the expression accepts lies in one of the boxes**.
Exact evaluation with lxml then runs only on the events the boxes let through.

What is understood (everything else widens to "anything" on the dimensions involved)

* Location paths made of child (``q:price``, ``child::q:price``) and attribute (``@sym``)
  steps, absolute or relative, with predicates at any step: ``/q:quote[q:price > 30]``
  constrains ``/q:quote/q:price``.  A path names a schema attribute when its steps, with
  prefixes resolved to namespace URIs, equal the steps of that attribute's ``xpath``
  (relative paths start at the event element, the context node of both).  An absolute
  path no attribute names, ``/R/s...``, also names a relative attribute ``s...``: events
  are matched as the roots of their own documents, and a comparison on ``/R/s...`` holds
  only when that root is ``R``.  (Not the other way round: a relative filter path says
  nothing of an absolute attribute, which reads nothing when the root is another element.)
* 2004/08 filters are evaluated on the notification's SOAP envelope (that submission's
  dialect): their paths read the event only through ``/s:Envelope/s:Body/...`` (or the
  relative ``s:Body/...``), which name what ``/...`` names in a 2011 filter.
* Comparisons ``=``, ``<``, ``<=``, ``>``, ``>=`` between such a path and a number or
  string literal, either side (``30 < q:price``), negative numbers included.
* ``and`` (per dimension: intersection), ``or`` and ``|`` (union), parentheses,
  ``true()``/``false()``; more than :data:`MAX_BOXES` alternatives collapse to their hull.
* ``not(...)``, ``!=``, functions, arithmetic, other axes, wildcards: no constraint.

Why the boxes are safe (no false negatives)

* XPath comparisons are existential over node-sets, and the schema reads an attribute that
  selects several nodes as the *hull* of their values.  A hull that holds one value in ``I1``
  and one in ``I2`` meets ``I1 ∩ I2`` when that is non-empty and the gap between them when
  it is not; ``and`` on one dimension therefore keeps "intersection, or else the gap".
* Node-set vs number compares ``number(string-value)``; the schema's number syntax accepts
  everything XPath's does, so a node XPath finds a number in has a value in the schema too.
  libxml2 does not round decimal input correctly (up to a few ulps off), so numeric bounds
  are widened by a relative 1e-12.
* Node-set vs string literal with ``=`` compares string-values verbatim, as the schema reads
  strings.  ``<``/``>`` on strings compare *numbers* in XPath 1.0: no constraint.  Equality
  with a blank literal is not used (an element holding an eCube range has blank text).
* dateTime attributes: only ``=`` with a parseable string literal constrains.
* A comparison that holds implies its node-set is non-empty, so its box excludes "absent"
  (NULL); an unconstrained dimension includes it.
"""

from __future__ import annotations

import functools
import logging
from decimal import Decimal
from typing import Any, Mapping

from elementpath import XPath1Parser

from wsframework.matching.base import FilterSpec
from .compiled_filter import CompiledFilter, frozen_rows
from .schema import DATETIME, NUMBER, STRING, Schema
from .schema.codecs import parse_datetime, parse_number
from .schema.extraction import EventBox
from .schema.intervals import MIRROR, Interval
from .xpath import _compile as _compile_xpath
from .xpath import envelope_namespace, envelope_of, xpath_boolean

__all__ = ["MAX_BOXES", "extract_constraints", "compile_xpath_filter", "path_key"]

log = logging.getLogger(__name__)

MAX_BOXES = 16
_RELATIVE = ("rel", ())
_ROOT = ("abs", ())
_ENVELOPE = ("env", ())  # relative paths of a 2004/08 filter start at the SOAP envelope
_COMPARISONS = frozenset(MIRROR)
_NUMERIC_SLACK = 1e-12

Terms = list  # list[dict[int, Interval]]: a union of boxes; [] never holds, [{}] always may
_ANYTHING: Terms = [{}]


# -- combining boxes ------------------------------------------------------------------------

def _and_interval(a: Interval, b: Interval) -> Interval:
    both = a.intersect(b)
    if not both.empty:
        return both
    # Disjoint: a multi-valued attribute holding a value in each spans the gap between them.
    return Interval(both.hi, False, both.lo, False)


def _and(left: Terms, right: Terms) -> Terms:
    result = []
    for a in left:
        for b in right:
            merged = dict(a)
            for dim, interval in b.items():
                merged[dim] = _and_interval(merged[dim], interval) if dim in merged else interval
            result.append(merged)
    return _capped(result)


def _or(left: Terms, right: Terms) -> Terms:
    return _capped(left + right)


def _capped(terms: Terms) -> Terms:
    if len(terms) <= MAX_BOXES:
        return terms
    return [_hull(terms)]


def _hull(terms: Terms) -> dict[int, Interval]:
    dims = set(terms[0])
    for term in terms[1:]:
        dims &= set(term)
    hull = {}
    for dim in dims:
        lows = [t[dim].lo for t in terms]
        highs = [t[dim].hi for t in terms]
        hull[dim] = Interval(None if None in lows else min(lows), False,
                             None if None in highs else max(highs), False)
    return hull


# -- paths ----------------------------------------------------------------------------------

def _name_step(token: Any, namespaces: Mapping[str, str], axis: str) -> tuple | None:
    if token.symbol == "(name)":
        return (axis, "", token.value)
    if token.symbol == ":" and len(token) == 2 and all(t.symbol == "(name)" for t in token):
        uri = namespaces.get(token[0].value)
        return None if uri is None else (axis, uri, token[1].value)
    return None


class _Extractor:
    def __init__(self, namespaces: Mapping[str, str], keys: Mapping[tuple, tuple[int, ...]],
                 schema: Schema, *, strict: bool = False, envelope: str | None = None) -> None:
        self.namespaces = namespaces
        self.keys = keys
        self.schema = schema
        self.strict = strict  # schema paths: a predicate makes a path non-canonical
        self.envelope = envelope  # the SOAP namespace when the context node is the envelope

    # walk(token, context) -> (key of the selected node-set or None, terms that must hold
    # for it to be non-empty)
    def walk(self, token: Any, context: tuple | None) -> tuple[tuple | None, Terms]:
        symbol = token.symbol
        if symbol == "/":
            if len(token) == 0:
                return _ROOT, _ANYTHING
            if len(token) == 1:
                return self.walk(token[0], _ROOT)
            left_key, left_terms = self.walk(token[0], context)
            right_key, right_terms = self.walk(token[1], left_key)
            return right_key, _and(left_terms, right_terms)
        if symbol == "//":
            if len(token) == 1:
                _, terms = self.walk(token[0], None)
                return None, terms
            _, left_terms = self.walk(token[0], context)
            _, right_terms = self.walk(token[1], None)
            return None, _and(left_terms, right_terms)
        if symbol == "[" and len(token) == 2:
            key, terms = self.walk(token[0], context)
            if self.strict:
                return None, _ANYTHING
            return key, _and(terms, self.predicate(token[1], key))
        if symbol == "(" and len(token) == 1:
            return self.walk(token[0], context)
        if symbol == "|" and len(token) == 2:
            left_key, left_terms = self.walk(token[0], context)
            right_key, right_terms = self.walk(token[1], context)
            key = left_key if left_key == right_key else None
            return key, _or(left_terms, right_terms)
        if symbol == "." and len(token) == 0:
            return context, _ANYTHING
        step = None
        if symbol in ("(name)", ":"):
            step = _name_step(token, self.namespaces, "child")
        elif symbol == "@" and len(token) == 1:
            step = _name_step(token[0], self.namespaces, "attribute")
        elif symbol in ("child", "attribute") and len(token) == 1:
            step = _name_step(token[0], self.namespaces, symbol)
        if step is None or context is None:
            return None, _ANYTHING
        return (context[0], context[1] + (step,)), _ANYTHING

    def predicate(self, token: Any, context: tuple | None) -> Terms:
        # A number-valued predicate is a position test; boolean() below only constrains
        # through comparisons, and/or and paths, so numbers and functions fall through to
        # "anything" there.
        return self.boolean(token, context)

    # boolean(token, context) -> terms that hold whenever boolean(token) is true
    def boolean(self, token: Any, context: tuple | None) -> Terms:
        symbol = token.symbol
        if symbol == "and" and len(token) == 2:
            return _and(self.boolean(token[0], context), self.boolean(token[1], context))
        if symbol == "or" and len(token) == 2:
            return _or(self.boolean(token[0], context), self.boolean(token[1], context))
        if symbol == "(" and len(token) == 1:
            return self.boolean(token[0], context)
        if symbol in _COMPARISONS and len(token) == 2:
            return self.comparison(token, context)
        if token.label == "function":
            if symbol == "false" and len(token) == 0:
                return []
            if symbol == "boolean" and len(token) == 1:
                return self.boolean(token[0], context)
            return _ANYTHING
        if self._is_path(token):
            _, terms = self.walk(token, context)
            return terms
        return _ANYTHING

    @staticmethod
    def _is_path(token: Any) -> bool:
        return token.symbol in ("/", "//", "[", "(name)", ":", "@", "child", "attribute", "|", ".")

    @staticmethod
    def _literal(token: Any) -> Any:
        """The value of a number or string literal token (None if it is not one)."""
        negate = False
        while token.symbol == "(" and len(token) == 1:
            token = token[0]
        if token.symbol == "-" and len(token) == 1:
            negate = True
            token = token[0]
            while token.symbol == "(" and len(token) == 1:
                token = token[0]
        if token.symbol in ("(integer)", "(decimal)", "(float)"):
            value = float(token.value) if isinstance(token.value, (int, float, Decimal)) else None
            return None if value is None else (-value if negate else value)
        if token.symbol == "(string)" and not negate:
            return str(token.value)
        return None

    def comparison(self, token: Any, context: tuple | None) -> Terms:
        op = token.symbol
        left, right = token[0], token[1]
        left_literal, right_literal = self._literal(left), self._literal(right)
        if left_literal is not None and right_literal is None and self._is_path(right):
            left, right, op = right, left, MIRROR[op]
            left_literal, right_literal = right_literal, left_literal
        if not self._is_path(left):
            return _ANYTHING
        if right_literal is None and not self._is_path(right):
            return _ANYTHING  # e.g. a boolean operand: an empty node-set can compare true
        key, terms = self.walk(left, context)
        if right_literal is None:  # path vs path: both are non-empty
            _, right_terms = self.walk(right, context)
            return _and(terms, right_terms)
        constraint = {}
        for dim in self._dims(key):
            interval = self._interval(dim, op, right_literal)
            if interval is not None:
                constraint[dim] = interval
        return _and(terms, [constraint]) if constraint else terms

    def _dims(self, key: tuple | None) -> tuple[int, ...]:
        """The schema attributes a path key reads. An absolute ``/R/s...`` that no
        attribute names reads what the relative ``s...`` reads: a comparison on it holds only
        when the document element is ``R``, and events are matched as the roots of their own
        documents (:func:`.schema.extraction.standalone`), so ``s...`` from the event element selects
        the same nodes."""
        if self.envelope is not None:
            key = self._in_event(key)
        dims = self.keys.get(key, ())
        if not dims and key is not None and key[0] == "abs" and len(key[1]) >= 2 \
                and key[1][0][0] == "child":
            dims = self.keys.get(("rel", key[1][1:]), ())
        return dims

    def _in_event(self, key: tuple | None) -> tuple | None:
        """A key read from the envelope (2004/08 filters) as the absolute key of the event
        document: ``/s:Envelope/s:Body/R/s...`` and the relative ``s:Body/R/s...`` both read
        ``/R/s...``; other paths (headers, the envelope itself) read no attribute."""
        if key is None:
            return None
        envelope, body = ("child", self.envelope, "Envelope"), ("child", self.envelope, "Body")
        kind, steps = key
        if kind == "abs" and steps[:2] == (envelope, body):
            return ("abs", steps[2:])
        if kind == "env" and steps[:1] == (body,):
            return ("abs", steps[1:])
        return None

    def _interval(self, dim: int, op: str, literal: Any) -> Interval | None:
        kind = self.schema.attributes[dim].type
        if kind == NUMBER:
            if isinstance(literal, str):
                value = parse_number(literal)  # '=': string-values equal, so values equal too
                if value is None:
                    return None
            else:
                value = literal
            slack = abs(value) * _NUMERIC_SLACK
            low, high = value - slack, value + slack
            return {
                "=": Interval(low, False, high, False),
                "<": Interval(None, False, high, False),
                "<=": Interval(None, False, high, False),
                ">": Interval(low, False, None, False),
                ">=": Interval(low, False, None, False),
            }[op]
        if op != "=" or not isinstance(literal, str) or not literal.strip():
            return None
        if kind == STRING:
            return Interval(literal, False, literal, False)
        if kind == DATETIME:
            value = parse_datetime(literal)
            return None if value is None else Interval(value, False, value, False)
        return None


def path_key(xpath: str, namespaces: Mapping[str, str]) -> tuple | None:
    """The canonical key of a plain location path (no predicates), or None.

    Keys are ``("abs" | "rel", ((axis, namespace-uri, local-name), ...))``.
    """
    try:
        token = XPath1Parser(namespaces=dict(namespaces)).parse(xpath)
    except Exception:  # elementpath rejects some valid XPath 1.0: just no key
        return None
    key, _ = _Extractor(namespaces, {}, Schema(), strict=True).walk(token, _RELATIVE)
    return key


@functools.lru_cache(maxsize=64)
def _schema_keys(schema: Schema) -> dict[tuple, tuple[int, ...]]:
    keys: dict[tuple, tuple[int, ...]] = {}
    for dim, attribute in enumerate(schema.attributes):
        key = path_key(attribute.xpath, dict(attribute.namespaces))
        if key is not None:
            keys[key] = keys.get(key, ()) + (dim,)
    return keys


def extract_constraints(expression: str, namespaces: Mapping[str, str],
                        schema: Schema, *, envelope: str | None = None
                        ) -> list[dict[int, Interval]]:
    """Boxes (``{dim: Interval}``, union) covering every event ``expression`` accepts.

    ``envelope`` (a SOAP namespace) says the expression is evaluated on the notification's
    envelope, not on the event (2004/08 filters): only paths through ``s:Body`` to the event
    then read schema attributes."""
    if not schema.d:
        return [{}]
    try:
        token = XPath1Parser(namespaces=dict(namespaces)).parse(expression)
    except Exception as exc:  # lxml accepted it (it compiled); elementpath may not
        log.debug("no range extraction for %r: %s", expression, exc)
        return [{}]
    extractor = _Extractor(namespaces, _schema_keys(schema), schema, envelope=envelope)
    return extractor.boolean(token, _ENVELOPE if envelope else _RELATIVE)


def compile_xpath_filter(spec: FilterSpec, schema: Schema) -> CompiledFilter:
    """An XPath 1.0 filter as boxes (extracted ranges) plus exact evaluation by lxml, with the
    default XPath matcher's semantics (``boolean()`` of the result; errors do not match)."""
    compiled = _compile_xpath(spec)  # InvalidFilter, exactly as the XPath matcher says it
    soap_ns = envelope_namespace(spec)
    terms = extract_constraints(spec.expression, spec.namespace_map, schema, envelope=soap_ns)
    mins, maxs = [], []
    for term in terms:
        lo, hi, _ = schema.box(term)
        mins.append(lo)
        maxs.append(hi)

    def check(event: Any, box: EventBox, variables: Mapping[str, Any] | None = None) -> bool:
        # an evaluation error propagates: the engines count it against this filter only
        if soap_ns is not None:  # 2004/08: the context node is the notification's envelope
            event = envelope_of(event, soap_ns, variables, box.derived)
        result = compiled(event, **variables) if variables else compiled(event)
        return xpath_boolean(result)

    return CompiledFilter(frozen_rows(mins, schema.d), frozen_rows(maxs, schema.d), False, check)
