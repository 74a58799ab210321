"""Stage-3 blind curation (``curate``: fold rules and decisions; ``guessers``: blind answering and its score cache;
``hardening``: Algorithm 1) and blind-answerability audits (``audit``).

They run models, so they live on the model side; what they write is the release schema, through ``builders``.
"""
