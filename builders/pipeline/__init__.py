"""The Sureon construction pipeline (the Sureon paper's Section 3.1, Appendix B.2-B.3), which the authors did not
release.

Stage 1 (:mod:`builders.pipeline.agents`) turns timestamped transcripts into grounded QA samples; stage 2
(:mod:`builders.pipeline.radg`) replaces their distractors by retrieval-augmented, multi-model ones. Both write the
release layout that ``sureon build sureon --release`` reads, so extended corpora become datasets unchanged.
"""
