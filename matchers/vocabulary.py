"""The names the EDN's matchers put on the wire: the ``edn`` namespace of their schemas and
summaries, the filter and summary dialects they implement, and the event namespace of their
examples. Standard namespaces and the framework's own names are in :mod:`wsframework.ns`."""

# The event distribution network's own XML: event schemas (edn:Schema), routing summaries
# (edn:Summary), event batches and the EDN's admin extensions (route_manager.protocol).
EDN = "urn:wsframework:edn"

# Filter dialects of the box engines (matchers.ranges, matchers.range_aggregate).
RANGES_DIALECT = "urn:wsframework:dialects:ranges"
RANGE_AGGREGATE_DIALECT = "urn:wsframework:dialects:range-aggregate"  # MIN/MAX over a range (S-CN)
RANGE_AGGREGATE = "urn:wsframework:range-aggregate"  # its table updates and reformulated changes

# The routing summary a route set reads (matchers.summary, matchers.route_set).
SUMMARY_DIALECT = "urn:wsframework:dialects:summary"

# The example event vocabulary of the engines' ``example_filters()`` and docs.
EXAMPLE_QUOTES = "urn:quotes"
