"""Stage 4 of the construction pipeline: expert review of the hardened validation set (the Sureon paper, B.5).

``store`` (accounts, assignments, the append-only decision log), ``assignment`` (who reviews what), ``reliability``
(agreement on the dual-reviewed subset), ``export`` (the approved ``bench`` config and the review reports) need
nothing beyond the core install; ``app`` (the reviewers' web UI) needs the ``review`` extra (Gradio). ``command``
is ``sureon review ACTION``.
"""

# The config under review unless ``--config`` says otherwise: the hardened validation pool the surgeons verify. Here,
# not in ``samples`` (which loads datasets), so that the command line offers it without loading anything.
DEFAULT_CONFIG = "validation_curated"
