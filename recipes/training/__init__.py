"""Support code of ``recipes/sft.py``: data mixture, collator, chat inputs, model loading, freezing, model card and
tiny models. Model loading and chat inputs are shared with evaluation and the guessers."""
