"""The data layer: dataset builders, and what they share.

Shared here: record schemas (``schema``), the one prompt formatter (``prompt``), options, column mappings, the Hub
writer (``hub``), dataset cards, the LLM client, plots, video opening and the append-only cache log. One sub-package
per dataset: ``sureon`` (the official release), ``surgiq`` (text MCQs), ``pipeline`` (building Sureon from new
videos, stages 1-2 and the stage-4 review app). Nothing here imports ``recipes`` (models) or ``sureon`` (the CLI).
"""
