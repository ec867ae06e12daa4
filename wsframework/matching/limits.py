"""Bounds on what one subscriber's filter may cost, checked before any engine compiles it.

A filter is text from a peer; the engines that compile it (libxml2, elementpath, the range
parser) recurse over its structure, and the regular expressions some dialects offer
backtrack. :func:`check_filter_limits` scans the expression once, left to right, with an
explicit bracket stack (never recursion, so a thousand nested predicates cannot raise
RecursionError here), and refuses with :class:`InvalidFilter` -- the "cannot process this
filter" fault at the WS-Eventing edge -- an expression that is too long, nests brackets
too deep, has too many steps/predicates/terms, or calls a regular-expression function.

Nested scans are refused too: an absolute path (``//*``, ``/a/b``) or a ``following``/
``preceding`` axis inside a predicate, a bracket used as a path step or the body of a
``for``/``some``/``every``, and more than one such binding expression. Each of those runs
once per node the outer path visits, so its cost is the square of the event's size
(``count(//*[count(//*) > 0])`` on 10,000 elements: 1.1 s in lxml, 86 s in elementpath).
One relative descendant scan in predicates (``//q:a[.//q:b]``) stays: it walks subtrees,
n x depth in all; nested ones (``//*[.//*[.//*]]``) multiply by the depth per level, and 30
of them on a 60-deep event did not finish in minutes. XPath 2.0 (elementpath, ~50x slower
than lxml) gets none: ten ``count(//*[.//*]) >= 0`` took 5.0 s on one 10,000-element event.

Regular expressions are refused, not budgeted: lxml's EXSLT ``re:`` functions and XPath
2.0 ``matches()``/``replace()``/``tokenize()`` run Python's backtracking ``re`` while
holding the GIL, so no time budget can interrupt them. Measured here: ``^(a+)+$`` on 26
characters takes 1.1 s; even the innocent ``.*x`` searched in 100,000 characters takes
3.3 s (quadratic), so refusing only nested quantifiers would not bound the cost. A
linear-time engine (google-re2) is not installed here and would have to replace both
lxml's EXSLT functions and elementpath's; until then ``allow_regex`` stays false.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ns
from .base import FilterSpec
from .errors import InvalidFilter

__all__ = ["FilterLimits", "check_filter_limits", "REGEX_FUNCTIONS"]

# Local names of regular-expression functions (EXSLT regexp: test, match, replace; XPath
# 2.0 fn: matches, replace, tokenize), whatever prefix they are called with.
REGEX_FUNCTIONS = frozenset({"test", "match", "replace", "matches", "tokenize"})
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
# after these a "/" continues a path; after anything else it starts one at the root
_PATH_CONTINUES = frozenset("a)]*.@/")
_OPERATOR_WORDS = frozenset({
    "and", "or", "div", "mod", "idiv", "eq", "ne", "lt", "le", "gt", "ge", "is", "to", "in",
    "union", "intersect", "except", "return", "satisfies", "then", "else", "-", "instance",
    "of", "treat", "as", "cast", "castable"})
# axes that walk (most of) the document from any node
_DESCENDANT_AXES = frozenset({"descendant", "descendant-or-self"})
_SCAN_AXES = frozenset({"following", "preceding", "following-sibling", "preceding-sibling"})
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")


@dataclass(frozen=True)
class FilterLimits:
    """What a filter may cost to compile and evaluate.

    ``max_length`` characters; ``max_depth`` nested brackets (``(``, ``[``, ``{``);
    ``max_steps`` location steps, predicates and boolean terms (``/``, ``[``, ``and``,
    ``or``, ``,``) together; ``allow_regex`` lets regular-expression functions through.
    """

    max_length: int = 4096
    max_depth: int = 32
    max_steps: int = 256
    allow_regex: bool = False

    def __post_init__(self) -> None:
        if min(self.max_length, self.max_depth, self.max_steps) < 1:
            raise ValueError("filter limits must be at least 1")


# A text with none of these has no path, call, axis, variable or literal: only brackets,
# commas, bars and boolean words count (a range filter, a simple comparison).
_COMPLEX_MARKERS = ("/", "(", "{", "$", "'", '"', "::")


def _is_complex(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_COMPLEX_MARKERS` (substring tests: a sixth of
    a regular expression's time, which a start pays a million times)."""
    for marker in _COMPLEX_MARKERS:
        if marker in text:
            return True
    return False


def check_filter_limits(spec: FilterSpec, limits: FilterLimits) -> None:
    """Raise :class:`InvalidFilter` if ``spec``'s expression exceeds ``limits``."""
    text = spec.expression
    if len(text) > limits.max_length:
        raise InvalidFilter(f"filter longer than {limits.max_length} characters")
    if not _is_complex(text) and _within_simple_bounds(text, limits):
        return  # what the scan below would find, counted without it (an upper bound)
    _scan(spec, text, limits)


def _within_simple_bounds(text: str, limits: FilterLimits) -> bool:
    """Whether a text without paths, calls, axes, variables and literals keeps the depth
    and step limits, counting every '[' as open (an upper bound of the nesting: the range
    dialect closes intervals with ')' too) and every boolean word, ',' and '|' as a step."""
    brackets = text.count("[")
    # every boolean word is an "and" or an "or" somewhere in the text (counting them as
    # substrings too, inside names, keeps the bound: a loose one only sends the text to the
    # scan), in a seventh of the time finding the words takes
    steps = (brackets + text.count(",") + text.count("|")
             + text.count("and") + text.count("or"))
    return brackets <= limits.max_depth and steps <= limits.max_steps


def _scan(spec: FilterSpec, text: str, limits: FilterLimits) -> None:
    # one entry per open bracket: True when what it holds runs once per node of a path
    # (a predicate, a bracket or call used as a path step, anything nested in those)
    stack: list[bool] = []
    steps = quantifiers = inner_scans = 0
    in_body = False  # after "satisfies" / "return": runs once per bound item
    last = " "  # the previous significant character ("a" ends a name, "'" a literal)
    start_of_word = " "
    position, end = 0, len(text)
    word_start = -1
    while position < end:
        char = text[position]
        if char in "'\"":
            closing = text.find(char, position + 1)
            if closing < 0:
                raise InvalidFilter("unterminated string literal")
            position = closing + 1
            word_start, last = -1, "'"
            continue
        if char in _NAME_CHARS:
            if word_start < 0:
                word_start, start_of_word = position, last
            position += 1
            continue
        iterating = bool(stack) and stack[-1]
        if word_start >= 0:
            word = text[word_start:position]
            word_start = -1
            last = " " if word in _OPERATOR_WORDS else "a"
            axis = word.partition("::")[0] if "::" in word else None
            if word in ("and", "or"):
                steps += 1
            elif word in ("for", "some", "every") and text[position:].lstrip().startswith("$"):
                quantifiers += 1
                if quantifiers > 1:
                    raise InvalidFilter("nested for/some/every expressions are not accepted")
            elif word in ("satisfies", "return"):
                in_body = True
            elif axis in _SCAN_AXES and (iterating or in_body):
                raise InvalidFilter(f"the {axis} axis inside a predicate is not accepted "
                                    "(its cost grows with the square of the event)")
            elif axis in _DESCENDANT_AXES and (iterating or in_body):
                inner_scans += 1
            if char == "(" or (char.isspace() and text[position:].lstrip().startswith("(")):
                local = word.rpartition(":")[2]
                if local in REGEX_FUNCTIONS and not limits.allow_regex:
                    raise InvalidFilter(f"regular-expression function {word}() not accepted")
                if start_of_word == "/":
                    last = "/"  # a call used as a path step
        if char in _OPEN:
            stack.append(iterating or in_body or char == "[" or last == "/")
            if len(stack) > limits.max_depth:
                raise InvalidFilter(f"filter nested deeper than {limits.max_depth} brackets")
            if char == "[":
                steps += 1
        elif char in _CLOSE and stack:  # not paired: the range dialect writes [1, 2)
            stack.pop()
        elif char in "/,|":
            steps += 1
            if char == "/" and last not in _PATH_CONTINUES and (iterating or in_body):
                raise InvalidFilter("a path from the document root inside a predicate is not "
                                    "accepted (its cost grows with the square of the event)")
            if char == "/" and last == "/" and (iterating or in_body):
                inner_scans += 1
        if inner_scans > (0 if spec.dialect == ns.XPATH20_DIALECT_2011 else 1):
            raise InvalidFilter("too many descendant scans inside predicates (nested, their "
                                "cost grows with the event's depth to the power of their "
                                "number; XPath 2.0, ~50x slower to evaluate, gets none)")
        if steps > limits.max_steps:
            raise InvalidFilter(f"filter has more than {limits.max_steps} steps, predicates "
                                "and terms")
        if not char.isspace():
            last = char
        position += 1
