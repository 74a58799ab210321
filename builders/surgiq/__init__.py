"""SurgiQ: the builder of the text-only MCQ benchmark (``build``), the reader of its source files (``reader``), its
label vocabularies (``vocabulary``), its near-duplicate search (``near_duplicates``) and the command lines of both
(``build_command``, ``near_duplicates_command``)."""
