"""The application: the ``edn`` command, its roles, the demos and the gunicorn launcher.

This is the top of the stack (paper Fig. 11): it imports the layers below and nothing
imports it, except the benchmarks and the tests. Lower packages plug in by registration:
roles through the ``edn.roles`` entry-point group (:mod:`edn.roles`), subcommands through
``edn.commands`` (:mod:`edn.cli`), as pytest and flask plugins do.

Modules: ``cli`` (the command and its built-in subcommands), ``roles``, ``gunicorn`` (the
launcher serving a role's WSGI application), ``sink`` (a notification sink, ``edn sink``),
``demo`` and ``network_demo`` (``edn demo``), ``localnet`` (real ``edn serve`` processes and
a whole network on loopback, for the demo, the benchmarks and the integration tests).
"""
