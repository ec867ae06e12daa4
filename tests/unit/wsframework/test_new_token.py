"""Tokens the roles make pass as command-line option values: none starts with '-', which
argparse would take for an option (``--access-token -abc...``: "expected one argument")."""
from __future__ import annotations

from wsframework.commandline import new_token


def test_no_token_starts_with_a_dash():
    tokens = [new_token(24) for _ in range(2000)]  # one in 64 would without the check
    assert not any(t.startswith("-") for t in tokens)
    assert len(set(tokens)) == 2000 and all(len(t) == 32 for t in tokens)
