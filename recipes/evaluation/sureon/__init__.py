"""The Sureon benchmark: ``evaluate`` (``sureon eval sureon``), ``metrics``, ``report`` (``sureon report sureon``)."""
