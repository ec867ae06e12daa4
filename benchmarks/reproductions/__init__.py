"""Reproductions of the papers' figures and studies of their designs.

The EDN paper: ``partitioning`` (section III-C, Figs. 3-6), ``throughput`` (Fig. 12),
``selftuning`` (Figs. 16, 17; ``climb_noise`` runs its tuner in process on the curves it
measured), ``distance`` (III-D, distance-aware placement) and
``topology`` (a dispatch tree against one dispatcher, with ``bloom`` summaries beside
boxes). Gryphon's link matching: ``brokers`` (the 39-broker wide-area simulation), ``pst``
(Chart 3's matching steps) and ``linkroutes`` (the link matcher's route set). Chandramouli
et al.'s richer subscriptions: ``richer_subscriptions``.
"""
