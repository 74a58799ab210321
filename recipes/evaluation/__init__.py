"""Running models on benchmarks and reporting them: inference backends, answer parsing, the judge, statistics, and
one sub-package per benchmark (``sureon``, ``surgiq``, ``public``), each with ``evaluate`` / ``metrics`` / ``report``
modules as it has them."""
