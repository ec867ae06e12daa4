"""The range filter dialect (``urn:wsframework:dialects:ranges``): filters as unions of boxes.

A range filter is a disjunction of conjunctions of predicates on the attributes of the topic's
event schema (:mod:`matchers.schema`); each conjunction is one rectangle of the event space.
It travels as the text of ``wse:Filter``::

    <wse:Filter Dialect="urn:wsframework:dialects:ranges">
      price >= 30 and price &lt; 50 and symbol = 'GE' or symbol ^= 'IB'
    </wse:Filter>

Grammar (keywords are lower case; ``or`` binds looser than ``and``; parentheses group)::

    filter      = disjunction
    disjunction = conjunction { "or" conjunction }
    conjunction = term { "and" term }
    term        = "(" disjunction ")" | predicate
    predicate   = NAME "exists"                     volume exists
                | NAME op literal                   price >= 30,  symbol = 'GE'
                | literal op NAME                   30 <= price   (mirrored)
                | NAME "in" interval                price in [10, 20)
                | NAME "^=" STRING                  symbol ^= 'IB'   (prefix)
    op          = "=" | "==" | "<" | "<=" | ">" | ">="
    interval    = ( "[" | "(" ) literal "," literal ( "]" | ")" )    closed [ ], open ( )
    literal     = NUMBER | STRING
    NUMBER      = [+-] digits [ "." digits ] [ ("e" | "E") [+-] digits ]
    STRING      = "'" chars "'" | '"' chars '"'      a quote inside is doubled: 'O''Brien'
    NAME        = letter or "_", then letters, digits, "_", ".", "-"

More examples::

    volume exists
    price in [10, 20) or price in (80, 90]
    symbol = 'GE' and (price < 10 or price > 90)       (expanded to two rectangles)
    time >= '2024-01-01T00:00:00Z' and time < '2024-02-01T00:00:00Z'

Meaning.  Numbers compare as floats, strings by code point (Python ``str`` order),
dateTimes (written as string literals) as instants; a number attribute takes number literals
and a string or dateTime attribute string literals.  Predicates on one attribute within a
conjunction intersect into one interval (an empty one is an error: the rectangle could never
match).  An event matches a conjunction when every constrained attribute is present and its
value (or, for a hypercube event, its range) meets the interval; ``exists`` only asks for
presence; attributes a conjunction does not mention match anything, absence included.

There is no ``not`` and no ``!=``: both would make a rectangle a complement.  Write
``price < 30 or price > 30`` instead.

Errors raise :class:`~wsframework.matching.errors.InvalidFilter` with the column and what was expected.

:func:`bind_range_filter` gives the :class:`~matchers.compiled_filter.CompiledFilter` the box
engines store; :func:`matchers.box_filters.compile_filter` does so for every box dialect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

from matchers.vocabulary import RANGES_DIALECT
from wsframework.matching.errors import InvalidFilter

from .compiled_filter import CompiledFilter, frozen_rows
from .schema import DATETIME, NUMBER, STRING, Schema
from .schema.codecs import parse_datetime, prefix_upper_bound
from .schema.extraction import EventBox
from .schema.intervals import MIRROR, Interval
from .schema.model import RESERVED_NAMES

__all__ = [
    "RANGES_DIALECT",
    "MAX_RECTANGLES",
    "Predicate",
    "RangeFilter",
    "parse_range_filter",
    "bind_range_filter",
]

MAX_RECTANGLES = 64  # alternatives one filter may expand to

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
  | (?P<op><=|>=|==|\^=|!=|[<>=\[\]\(\),])
""", re.VERBOSE)
_KEYWORDS = RESERVED_NAMES  # attribute names may not be the dialect's keywords


class _Token(NamedTuple):
    kind: str  # number, string, name, keyword, op, end
    text: str
    column: int  # 1-based
    value: Any = None

    def describe(self) -> str:
        if self.kind == "end":
            return "the end of the filter"
        if self.kind == "keyword":
            return f"keyword {self.text!r}"
        return f"{self.kind} {self.text!r}" if self.kind != "op" else repr(self.text)


def _tokens(text: str) -> Iterator[_Token]:
    position = 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:
            raise InvalidFilter(f"column {position + 1}: unexpected character "
                                f"{text[position]!r} in {text!r}")
        kind = found.lastgroup
        lexeme = found.group()
        column = position + 1
        position = found.end()
        if kind == "space":
            continue
        if kind == "number":
            yield _Token("number", lexeme, column, float(lexeme))
        elif kind == "string":
            quote = lexeme[0]
            yield _Token("string", lexeme, column, lexeme[1:-1].replace(quote * 2, quote))
        elif kind == "name" and lexeme in _KEYWORDS:
            yield _Token("keyword", lexeme, column)
        else:
            yield _Token(kind, lexeme, column)
    yield _Token("end", "", len(text) + 1)


# -- the syntax tree ------------------------------------------------------------------------

@dataclass(frozen=True)
class Predicate:
    """One predicate on attribute ``name``.

    ``op`` is ``exists``, ``=``, ``<``, ``<=``, ``>``, ``>=``, ``^=`` (then ``value`` is the
    literal: float or str) or ``in`` (then ``value`` and ``high`` are the ends, ``lo_open`` /
    ``hi_open`` say which are excluded).
    """

    name: str
    op: str
    value: Any = None
    high: Any = None
    lo_open: bool = False
    hi_open: bool = False

    def to_text(self) -> str:
        if self.op == "exists":
            return f"{self.name} exists"
        if self.op == "in":
            return (f"{self.name} in {'(' if self.lo_open else '['}{_literal(self.value)}, "
                    f"{_literal(self.high)}{')' if self.hi_open else ']'}")
        return f"{self.name} {self.op} {_literal(self.value)}"


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(float(value))


@dataclass(frozen=True)
class RangeFilter:
    """A parsed range filter in disjunctive normal form: ``or`` of ``and`` of predicates."""

    conjunctions: tuple[tuple[Predicate, ...], ...]

    def to_text(self) -> str:
        """Canonical text; ``parse_range_filter(f.to_text()) == f``."""
        return " or ".join(" and ".join(p.to_text() for p in conj) for conj in self.conjunctions)

    def __str__(self) -> str:
        return self.to_text()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = list(_tokens(text))
        self.position = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.position]

    def advance(self) -> _Token:
        token = self.tokens[self.position]
        self.position += 1
        return token

    def fail(self, expected: str, token: _Token | None = None) -> InvalidFilter:
        token = token or self.current
        hint = ""
        if token.kind == "name" and token.text.lower() in _KEYWORDS:
            hint = " (keywords are lower case)"
        return InvalidFilter(f"column {token.column}: expected {expected}, found "
                             f"{token.describe()}{hint} in {self.text!r}")

    def parse(self) -> RangeFilter:
        if self.current.kind == "end":
            raise InvalidFilter("empty filter")
        conjunctions = self.disjunction()
        if self.current.kind != "end":
            raise self.fail("'and', 'or' or the end of the filter")
        return RangeFilter(tuple(conjunctions))

    def disjunction(self) -> list[tuple[Predicate, ...]]:
        alternatives = self.conjunction()
        while self.current.kind == "keyword" and self.current.text == "or":
            self.advance()
            alternatives = alternatives + self.conjunction()
            self._limit(alternatives)
        return alternatives

    def conjunction(self) -> list[tuple[Predicate, ...]]:
        alternatives = self.term()
        while self.current.kind == "keyword" and self.current.text == "and":
            self.advance()
            right = self.term()
            alternatives = [a + b for a in alternatives for b in right]
            self._limit(alternatives)
        return alternatives

    def _limit(self, alternatives: list) -> None:
        if len(alternatives) > MAX_RECTANGLES:
            raise InvalidFilter(f"the filter expands to more than {MAX_RECTANGLES} rectangles: "
                                f"{self.text!r}")

    def term(self) -> list[tuple[Predicate, ...]]:
        token = self.current
        if token.kind == "op" and token.text == "(":
            self.advance()
            inner = self.disjunction()
            if not (self.current.kind == "op" and self.current.text == ")"):
                raise self.fail("')' closing the '(' at column " f"{token.column}")
            self.advance()
            return inner
        return [(self.predicate(),)]

    def predicate(self) -> Predicate:
        token = self.current
        if token.kind == "keyword" and token.text == "not":
            raise InvalidFilter(f"column {token.column}: 'not' is not supported (a range filter "
                                f"is a union of rectangles) in {self.text!r}")
        if token.kind in ("number", "string"):  # literal op NAME
            self.advance()
            op = self.operator()
            name = self.current
            if name.kind != "name":
                raise self.fail("an attribute name")
            self.advance()
            return Predicate(name.text, MIRROR[op], token.value)
        if token.kind != "name":
            raise self.fail("an attribute name, a literal or '('")
        self.advance()
        following = self.current
        if following.kind == "keyword" and following.text == "exists":
            self.advance()
            return Predicate(token.text, "exists")
        if following.kind == "keyword" and following.text == "in":
            self.advance()
            return self.interval(token.text)
        if following.kind == "op" and following.text == "^=":
            self.advance()
            literal = self.current
            if literal.kind != "string":
                raise self.fail("a string literal after '^='")
            self.advance()
            return Predicate(token.text, "^=", literal.value)
        op = self.operator(after=token.text)
        literal = self.literal(f"a value after {op!r}")
        return Predicate(token.text, op, literal)

    def operator(self, after: str | None = None) -> str:
        token = self.current
        if token.kind == "op" and token.text == "!=":
            raise InvalidFilter(f"column {token.column}: '!=' is not supported (a range filter is "
                                "a union of rectangles; write 'x < v or x > v') in "
                                f"{self.text!r}")
        if token.kind == "op" and token.text in ("=", "==", "<", "<=", ">", ">="):
            self.advance()
            return "=" if token.text == "==" else token.text
        what = "a comparison operator, 'in', '^=' or 'exists'" if after else "a comparison operator"
        raise self.fail(what + (f" after {after!r}" if after else ""))

    def literal(self, expected: str) -> Any:
        token = self.current
        if token.kind not in ("number", "string"):
            raise self.fail(expected)
        self.advance()
        return token.value

    def interval(self, name: str) -> Predicate:
        opening = self.current
        if not (opening.kind == "op" and opening.text in "[("):
            raise self.fail("'[' or '(' starting an interval")
        self.advance()
        low = self.literal("the interval's lower end")
        if not (self.current.kind == "op" and self.current.text == ","):
            raise self.fail("',' between the interval's ends")
        self.advance()
        high = self.literal("the interval's upper end")
        closing = self.current
        if not (closing.kind == "op" and closing.text in "])"):
            raise self.fail("']' or ')' closing the interval")
        self.advance()
        return Predicate(name, "in", low, high, opening.text == "(", closing.text == ")")


def parse_range_filter(text: str) -> RangeFilter:
    """Parse range-dialect ``text`` (syntax only; :func:`bind_range_filter` checks names and
    types against a schema).  Raises :class:`InvalidFilter`."""
    simple = _parse_conjunction_of_numbers(text)
    return simple if simple is not None else _Parser(text).parse()


# The common form, parsed by two regular expressions instead of the tokenizer and parser
# (a fifth of the time): predicates on numbers joined by 'and' with white space around it.
# Anything else (and every error) goes to the parser, whose result this one equals.
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SIMPLE_PREDICATE = re.compile(rf"""\s*(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?:
      \s+in\s*(?P<open>[\[(])\s*(?P<low>{_NUMBER})\s*,\s*(?P<high>{_NUMBER})\s*(?P<close>[\])])
    | \s*(?P<op><=|>=|==|<|>|=)\s*(?P<value>{_NUMBER}))\s*""", re.VERBOSE)
_AND = re.compile(r"\s+and\s+")


def _parse_conjunction_of_numbers(text: str) -> RangeFilter | None:
    predicates = []
    for part in _AND.split(text):
        found = _SIMPLE_PREDICATE.fullmatch(part)
        if found is None or found["name"] in _KEYWORDS:
            return None
        name = found["name"]
        if found["open"] is not None:
            predicates.append(Predicate(name, "in", float(found["low"]), float(found["high"]),
                                        found["open"] == "(", found["close"] == ")"))
        else:
            op = found["op"]
            predicates.append(Predicate(name, "=" if op == "==" else op, float(found["value"])))
    return RangeFilter((tuple(predicates),))


# -- binding to a schema --------------------------------------------------------------------

def _typed(schema: Schema, predicate: Predicate, literal: Any) -> Any:
    attribute = schema.attributes[schema.dim(predicate.name)]
    if attribute.type == NUMBER:
        if not isinstance(literal, float):
            raise InvalidFilter(f"{predicate.to_text()!r}: {predicate.name} is a number; "
                                f"compare it with a number, not {_literal(literal)}")
        return literal
    if not isinstance(literal, str):
        raise InvalidFilter(f"{predicate.to_text()!r}: {predicate.name} is a {attribute.type}; "
                            "compare it with a quoted literal")
    if attribute.type == DATETIME:
        value = parse_datetime(literal)
        if value is None:
            raise InvalidFilter(f"{predicate.to_text()!r}: {literal!r} is not a dateTime "
                                "(ISO 8601, e.g. '2024-01-31T12:00:00Z')")
        return value
    return literal


def _interval(schema: Schema, predicate: Predicate) -> Interval:
    op = predicate.op
    if op == "exists":
        return Interval()
    if op == "^=":
        if schema.attributes[schema.dim(predicate.name)].type != STRING:
            raise InvalidFilter(f"{predicate.to_text()!r}: '^=' (prefix) needs a string attribute")
        prefix = _typed(schema, predicate, predicate.value)
        upper = prefix_upper_bound(prefix)
        return Interval(prefix, False, upper, upper is not None)
    if op == "in":
        low = _typed(schema, predicate, predicate.value)
        high = _typed(schema, predicate, predicate.high)
        return Interval(low, predicate.lo_open, high, predicate.hi_open)
    value = _typed(schema, predicate, predicate.value)
    return {
        "=": Interval(value, False, value, False),
        "<": Interval(None, False, value, True),
        "<=": Interval(None, False, value, False),
        ">": Interval(value, True, None, False),
        ">=": Interval(value, False, None, False),
    }[op]


def bind_range_filter(parsed: RangeFilter, schema: Schema) -> CompiledFilter:
    """The boxes and exact check of ``parsed`` under ``schema`` (InvalidFilter on unknown
    attributes, mistyped literals and rectangles that can never match)."""
    conjunctions: list[tuple[tuple[int, Interval], ...]] = []
    mins, maxs = [], []
    box_exact = True
    for conjunction in parsed.conjunctions:
        constraints: dict[int, Interval] = {}
        for predicate in conjunction:
            if predicate.name not in schema:
                known = ", ".join(schema.dims) or "none: the topic was created without a schema"
                raise InvalidFilter(f"unknown attribute {predicate.name!r} (the schema's "
                                    f"attributes: {known})")
            dim = schema.dim(predicate.name)
            interval = _interval(schema, predicate)
            merged = constraints[dim].intersect(interval) if dim in constraints else interval
            if merged.empty:
                text = " and ".join(p.to_text() for p in conjunction)
                raise InvalidFilter(f"{text!r} can never match: its conditions on "
                                    f"{predicate.name!r} exclude each other")
            constraints[dim] = merged
        lo, hi, exact = schema.box(constraints)
        mins.append(lo)
        maxs.append(hi)
        box_exact = box_exact and exact
        conjunctions.append(tuple(sorted(constraints.items())))
    frozen = tuple(conjunctions)

    def check(event: Any, box: EventBox, variables: Any = None) -> bool:
        values = box.values
        for conjunction in frozen:
            for dim, interval in conjunction:
                value = values[dim]
                if value is None or not interval.overlaps(value[0], value[1]):
                    break
            else:
                return True
        return False

    return CompiledFilter(frozen_rows(mins, schema.d), frozen_rows(maxs, schema.d), box_exact, check)
