"""Small argument-parsing helpers shared by every package that adds ``edn`` subcommands."""
from __future__ import annotations

import argparse


def key_value(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(key, value)``, both stripped; an argparse type."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def number(text: str):
    """``text`` as an int, else a float, else unchanged (figures of admin answers)."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def new_token(nbytes: int = 32) -> str:
    """A random URL-safe token of ``nbytes`` bytes that never starts with '-': a user passes
    it as an option's value (``--access-token TOKEN``), which argparse would otherwise take
    for an option of its own (one token in 64)."""
    import secrets
    while True:
        token = secrets.token_urlsafe(nbytes)
        if not token.startswith("-"):
            return token
