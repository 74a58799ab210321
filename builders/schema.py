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


# The text-only multiple-choice record (SurgiQ): ``options`` in presentation order, ``answer`` its letter,
# ``option_order`` the stored position of each presented option (identity unless the config reorders them).
TEXT_MCQ_FEATURES = Features(
    {
        "id": Value("string"),
        "question": Value("string"),
        "options": List(Value("string")),
        "answer": Value("string"),
        "answer_index": Value("int32"),
        "option_order": List(Value("int32")),
        "explanation": Value("string"),
        "domain": Value("string"),
        "question_type": Value("string"),
        "source_type": Value("string"),
    }
)


def text_mcq_features(extra_schema: pa.Schema | None = None) -> Features:
    """The text-MCQ features plus carried-through source columns."""
    features = Features(dict(TEXT_MCQ_FEATURES))
    if extra_schema is not None:
        features.update(Features.from_arrow_schema(extra_schema))
    return features
