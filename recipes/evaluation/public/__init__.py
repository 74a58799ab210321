"""The public perception benchmarks (seed D.3, Table 5): ``metrics`` and ``report`` (``sureon report public``)."""
