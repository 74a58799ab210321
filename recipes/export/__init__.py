"""Exports to the tools researchers already use: lm-eval and lmms-eval tasks, VLMEvalKit datasets, training files for
other frameworks.

One module per target (``lm_eval.py``, ``lmms_eval.py``, ``vlmevalkit.py``, ``sft.py``), each a ``sureon export``
sub-command; ``vlmevalkit_dataset.py`` is the VLMEvalKit dataset class and launcher the VLMEvalKit export copies into
its folder. What the targets share: ``frames.py`` (how an export places a build's frames), ``sureon_benchmark.py``
(the Sureon build and metric names of the benchmark exports), ``task_files.py`` (a task folder's files). The exported
tasks call back into this package for their prompt and scoring functions (the folder's ``utils.py`` is a generated
shim), so an exported task renders the project's one prompt formatter and parses answers with the project's one
answer parser, never a copy of them.
"""
