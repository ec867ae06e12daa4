"""Route managers (paper Fig. 11): route administration and, for the EDN, summary-based event
routing on the dispatcher and subscription routing among servers.

Where things are:

* the live dispatcher: :mod:`.dispatcher` (route table, hot path, admin, precision control,
  dispatch trees) and :mod:`.forwarding` (per-server channels, batches, the durable log, the
  link cap); :mod:`.selftuning` and :mod:`.precision` (what precision means and how it moves),
  :mod:`.precision_profile` (the starting precision ``edn profile`` recommends);
* a node's conversation with the dispatchers above it: :mod:`.uplink`;
* a subscription server's routing among its peers: :mod:`.peers` (what it knows of them) and
  :mod:`.placement_router` (where a new subscription goes), with :mod:`.latency_matrix`;
* offline partitioning: :mod:`.partitioning` (the partitioners, Kyra in
  :mod:`.partitioning.kyra`) and :mod:`.repartition` (the dispatcher's Repartition operation
  that runs one and moves subscriptions);
* the paper's models and workloads: :mod:`.models` (throughput, hit ratio, measurement) and
  :mod:`.workloads` (synthetic rectangles and points, and their XML form);
* shared: :mod:`.base` (the base route manager), :mod:`.exceptions`, :mod:`.protocol` (the
  EDN's admin messages and names on the wire).

The wide-area simulator (:mod:`simulation`) and the Spark jobs (:mod:`spark_jobs`) are
top-level packages of their own, above this one.
"""
