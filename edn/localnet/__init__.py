"""Real ``edn serve`` processes on this machine: one at a time (:mod:`.processes`) or a whole
event distribution network with its notification sink and ground truth (:mod:`.network`).

What ``edn demo``, the network benchmarks and the integration tests run; nothing below the
application layer imports it.
"""
