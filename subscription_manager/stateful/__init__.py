"""Stateful subscriptions over the stateless network (Chandramouli's richer subscriptions).

Each module holds one idea; import from the module itself:

- :mod:`.intervals`: notification conditions over a stateless network (section 5.3.3). The
  publisher keeps an interval set of bounds and turns each value of a stream into messages
  ``<LOW, HIGH, UPDATE>``; a subscription with bound δ filters ``low < δ and high >= δ``
  and receives exactly the values that changed by at least δ since the last one it received::

      from subscription_manager.stateful.intervals import IntervalSet
      intervals = IntervalSet(limit=10)
      intervals.update(100)   # [<0, 10, 100>]: every bound starts at 100
      intervals.update(105)   # [<0, 5, 105>]
      intervals.update(108)   # [<0, 3, 108>, <5, 8, 108>]

- :mod:`.interval_store`: the same set durable in SQLite, with an outbox of the messages.
- :mod:`.interval_publisher`: the publisher-side piece that sends those messages as events of
  a topic through the EDN (``edn intervals``, :mod:`.interval_commands`).
- :mod:`.range_min_table`: range-aggregate subscriptions (section 4.2.4): a table's MIN
  and MAX over ranges, and the change messages each tuple update turns into.
- :mod:`.table_service` and :mod:`.table_role`: the service that keeps a published table
  and sends its changes to the EDN (``edn serve table``).
- :mod:`.feed`: how both publisher-side services send their changes (one publication, or
  one ``edn:EventBatch``).

What the package holds in common: the state a subscription depends on (the last value it
was told, an aggregate over a table) lives at the publisher side, which turns each change
into events that stateless filters match at the EDN.
"""
