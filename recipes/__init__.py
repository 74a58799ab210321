"""The model layer: training (``sft.py`` + ``training``), evaluation (``evaluation``) and stage-3 curation.

Everything here may use the data layer (``builders``, ``public_converters``); nothing there imports this package.
"""
