"""Speed benchmarks: how fast the product's own paths run, in process or on real processes.

``messaging`` (SOAP parse + dispatch + reply), ``matchers`` (the matching engines side by
side), ``hem`` (the cell-bitmap engine on HEM's 1M-subscription workload), ``eventing`` and
``delivery`` (a source's Subscribe and notification rates), ``serverpath`` (a server's CPU
per forwarded copy), ``durability`` (the dispatcher's durable log on and off) and
``eventpath`` (the whole event path's figures in one run).
"""
