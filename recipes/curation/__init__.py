"""Stage-3 blind curation (``curate``: guessers, folds, hardening) and blind-answerability audits (``audit``).

They run models, so they live on the model side; what they write is the release schema, through ``builders``.
"""
