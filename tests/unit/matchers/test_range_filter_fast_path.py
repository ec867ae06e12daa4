"""The common range filter form (number predicates joined by 'and') is parsed by regular
expressions; whatever it accepts, the full parser parses to the same RangeFilter, and what
it declines (other forms, every error) the parser decides. Checked on generated texts."""
from __future__ import annotations

import random

import numpy as np

from matchers.ranges import InvalidFilter, _parse_conjunction_of_numbers, _Parser, parse_range_filter
from route_manager.workloads.grid_xml import range_filter

_NAMES = ["x0", "price", "a.b", "b-c", "_z", "in", "and", "or", "not", "exists", "In", "x0in"]
_NUMBERS = ["1", "-2.5", "+3.", ".5", "1e3", "2E-2", "07", "1.5e", "--1", "'s'", "x"]
_SPACES = ["", " ", "  ", "\t", "\n"]
_OPS = ["<", "<=", ">", ">=", "=", "==", "!=", "^=", "=<"]


def _predicate(rng: random.Random) -> str:
    name, sp = rng.choice(_NAMES), lambda: rng.choice(_SPACES)
    if rng.random() < 0.5:
        return (f"{sp()}{name}{rng.choice(['', ' ', '  '])}in{sp()}{rng.choice('[(')}{sp()}"
                f"{rng.choice(_NUMBERS)}{sp()}{rng.choice([',', ';'])}{sp()}"
                f"{rng.choice(_NUMBERS)}{sp()}{rng.choice('])')}{sp()}")
    return f"{sp()}{name}{sp()}{rng.choice(_OPS)}{sp()}{rng.choice(_NUMBERS)}{sp()}"


def _text(rng: random.Random) -> str:
    parts = [_predicate(rng) for _ in range(rng.randint(1, 4))]
    joins = [rng.choice([" and ", "and", "  and\t", " or ", " AND "]) for _ in parts[1:]]
    text = parts[0] + "".join(j + p for j, p in zip(joins, parts[1:]))
    return rng.choice(["", "(", " "]) + text + rng.choice(["", ")", " and", " "])


def _full(text: str):
    try:
        return _Parser(text).parse()
    except InvalidFilter:
        return None


def test_the_fast_path_agrees_with_the_parser_wherever_it_answers():
    rng = random.Random(7)
    answered = 0
    for _ in range(20_000):
        text = _text(rng)
        fast = _parse_conjunction_of_numbers(text)
        if fast is not None:
            answered += 1
            assert fast == _full(text), text
    assert answered > 200  # the generator reaches the fast path often enough


def test_the_workloads_filters_take_the_fast_path():
    lo = np.array([0.5, 1.25, -3.0])
    text = range_filter(lo, lo + 2)
    assert _parse_conjunction_of_numbers(text) is not None
    assert parse_range_filter(text) == _Parser(text).parse()
