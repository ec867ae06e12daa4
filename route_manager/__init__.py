"""Route managers (paper Fig. 11): route administration and, for the EDN, summary-based event
routing on the dispatcher and subscription routing among servers. Filled in by the EDN work."""
