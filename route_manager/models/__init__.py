"""The paper's analytical models and the live measurements that feed them.

* :mod:`.throughput`: the throughput model (IV-A, V-B, appendix): the dispatcher's, links' and
  servers' throughput as functions of T_f, T_d, T_c, R, S_m, B; relative throughput at the
  optimum; dispatch trees.
* :mod:`.hit_ratio`: the hit ratio R of summary-based routing (III-B, III-C) for a set of
  summaries and events, with a slab-bitset containment index.
* :mod:`.measurement`: the model's parameters measured on a running dispatcher, from two
  readings of its counters (V-B).

The dispatcher reads :mod:`.measurement`; the benchmarks, the Spark jobs and the offline
repartitioning read the models.
"""
