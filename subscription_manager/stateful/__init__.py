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
  a topic through the EDN (``edn intervals``).
"""
