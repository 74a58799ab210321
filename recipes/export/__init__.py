"""Exports to the tools researchers already use: lm-eval and lmms-eval tasks, training files for other frameworks.

One module per target (``lm_eval.py``, ``lmms_eval.py``, ``sft.py``), each a ``sureon export`` sub-command. The
exported tasks call back into this package for their prompt and scoring functions (the folder's ``utils.py`` is a
generated shim), so an exported task renders the project's one prompt formatter and parses answers with the
project's one answer parser, never a copy of them.
"""
