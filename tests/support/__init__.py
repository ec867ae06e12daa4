"""Shared test helpers: real server processes, a real HTTP notification sink, XML helpers."""
