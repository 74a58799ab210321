"""SurgiQ: ``evaluate`` (log-likelihood scoring), ``calibration``, ``report`` and the ``shortcuts`` baselines."""
