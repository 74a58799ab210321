"""The video-QA record schema: one ``datasets.Features`` shared by the Sureon builder, the construction pipeline,
training and evaluation. Columns beyond it (carried through from a release) are appended with their own types."""

import pyarrow as pa
from datasets import Features, Image, List, Value


VIDEO_QA_FEATURES = Features(
    {
        "question_id": Value("string"),
        "clip_id": Value("string"),
        "source_id": Value("string"),
        "start": Value("float64"),
        "end": Value("float64"),
        "category": Value("string"),
        "category_slug": Value("string"),
        "question": Value("string"),
        "options": List(Value("string")),
        "answer": Value("string"),
        "answer_index": Value("int32"),
        "answer_format": Value("string"),
        "answer_order": List(Value("string")),
        "passes_blind_curation": Value("bool"),
        "specialty": Value("string"),
        "subject": Value("string"),
        "procedure": Value("string"),
        "transcript": Value("string"),
        "reasoning": Value("string"),
    }
)
FRAME_FEATURES = Features({"frames": List(Image()), "frame_timestamps": List(Value("float64"))})


def video_qa_features(with_frames: bool, extra_schema: pa.Schema | None = None) -> Features:
    """The record features, plus frames when videos are given, plus carried-through release columns."""
    features = Features(dict(VIDEO_QA_FEATURES))
    if with_frames:
        features.update(FRAME_FEATURES)
    if extra_schema is not None:
        features.update(Features.from_arrow_schema(extra_schema))
    return features
