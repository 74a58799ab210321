"""Sureon from the official annotation-only release: release reader, options, clip ids, categories, frames, folds,
distractor pools, and the build of every config (``build``)."""
