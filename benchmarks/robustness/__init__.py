"""Robustness harnesses: whether every role keeps serving, and serves right, under hostile or
failing conditions (real processes on loopback).

``fuzz`` (fuzzed messages and malformed HTTP), ``kill`` (``kill -9`` during bursts),
``slowclients`` (idle, slowloris and slow-body connections), ``worstfilters`` (the most
expensive accepted filters) and ``placement`` (concurrent Subscribes across servers, with
MessageID replays).
"""
