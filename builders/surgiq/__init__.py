"""SurgiQ: the builder of the text-only MCQ benchmark (``build``) and its near-duplicate search."""
