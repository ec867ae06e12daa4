"""The names the EDN's matchers put on the wire: the URIs that name the engines (in the
framework's matcher registry, beside its default ``wsframework.ns.MATCHER_XPATH``), the
``edn`` namespace of their schemas and summaries, the filter and summary dialects they
implement, and the event namespace of their examples. Standard namespaces and the
framework's own names are in :mod:`wsframework.ns`."""

# The engines (pyproject.toml's ``wsframework.matchers`` entry points).
MATCHER_RTREE_ENGINE = "urn:wsframework:matchers:rtree-matching-engine"
MATCHER_RTREE_ROUTE_SET = "urn:wsframework:matchers:rtree-route-set"
MATCHER_BRUTE_FORCE = "urn:wsframework:matchers:brute-force"
MATCHER_CELL_BITMAP = "urn:wsframework:matchers:cell-bitmap"
MATCHER_PST = "urn:wsframework:matchers:pst"  # Gryphon's parallel search tree (equalities)

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
