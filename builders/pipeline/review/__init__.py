"""Stage 4 of the construction pipeline: expert review of the hardened validation set (seed B.5).

``store`` (accounts, assignments, the append-only decision log), ``assignment`` (who reviews what), ``reliability``
(agreement on the dual-reviewed subset), ``export`` (the approved ``bench`` config and the review reports) need
nothing beyond the core install; ``app`` (the reviewers' web UI) needs the ``review`` extra (Gradio).
"""
