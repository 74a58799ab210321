"""The public perception benchmarks (the Sureon paper, D.3, Table 5): ``metrics`` and ``report`` (``sureon report
public``)."""
