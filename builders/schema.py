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
# ``blurred_regions``: per frame, the boxes blurred before encoding (0-1000 grid) and the detector that found each
# (``text``, ``faces``, ``yolo``; see builders/blur.py); empty lists for frames left untouched or configs not blurred.
BLURRED_REGION = {"detector": Value("string"), "box": List(Value("int32"))}
FRAME_FEATURES = Features(
    {
        "frames": List(Image()),
        "frame_timestamps": List(Value("float64")),
        "blurred_regions": List(List(BLURRED_REGION)),
    }
)
# The files layout (``--frames-layout files``): ``frames`` are paths relative to the dataset folder, as in the public
# corpus, each frame stored once under ``media/``.
FRAME_PATH_FEATURES = Features(
    {
        "frames": List(Value("string")),
        "frame_timestamps": List(Value("float64")),
        "blurred_regions": List(List(BLURRED_REGION)),
    }
)


def video_qa_features(
    with_frames: bool, extra_schema: pa.Schema | None = None, frames_as_paths: bool = False
) -> Features:
    """The record features, plus frames when videos are given (embedded JPEGs, or relative paths), plus
    carried-through release columns."""
    features = Features(dict(VIDEO_QA_FEATURES))
    if with_frames:
        features.update(FRAME_PATH_FEATURES if frames_as_paths else FRAME_FEATURES)
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


# The public-corpus QA record (templated from the 22 public sources, the Sureon paper's Appendix C). ``frames`` are
# paths relative to the dataset folder (``media/...``): one image for the image branch, the sampled clip frames for the
# clip branch, stored once per frame however many QAs use it. ``start`` / ``end`` (seconds) are set for clips only, so
# the one prompt formatter shows a clip header for clips and a bare image for frames.
# One public perception benchmark query (``bench-*`` configs of the public corpus; public_converters/benchmarks.py).
# ``frames`` are media paths relative to the dataset folder, the keyframe last; boxes are [x1, y1, x2, y2] on the
# 0-1000 grid; ``reference`` is the label (phase, action), "yes"/"no" (cvs) or null (tool localisation).
PUBLIC_BENCH_FEATURES = Features(
    {
        "question_id": Value("string"),
        "benchmark": Value("string"),
        "source": Value("string"),
        "task": Value("string"),
        "input_mode": Value("string"),
        "split": Value("string"),
        "procedure": Value("string"),
        "video_id": Value("string"),
        "frame_index": Value("int64"),
        "timestamp": Value("float64"),
        "start": Value("float64"),
        "end": Value("float64"),
        "frame_indices": List(Value("int64")),
        "frame_timestamps": List(Value("float64")),
        "frames": List(Value("string")),
        "criterion": Value("string"),
        "question": Value("string"),
        "answer_format": Value("string"),
        "answer_shape": Value("string"),
        "answer_key": Value("string"),
        "labels": List(Value("string")),
        "answer": Value("string"),
        "reference": Value("string"),
        "reference_boxes": List({"label": Value("string"), "bbox": List(Value("float64"))}),
    }
)


PUBLIC_QA_FEATURES = Features(
    {
        "qa_id": Value("string"),
        "item_id": Value("string"),
        "source": Value("string"),
        "branch": Value("string"),
        "split": Value("string"),
        "procedure": Value("string"),
        "video_id": Value("string"),
        "file": Value("string"),
        "frame_index": Value("int64"),
        "start_frame": Value("int64"),
        "end_frame": Value("int64"),
        "start": Value("float64"),
        "end": Value("float64"),
        "qa_type": Value("string"),
        "question_type": Value("string"),
        "template_id": Value("string"),
        "grounded": Value("bool"),
        "version": Value("string"),
        "question": Value("string"),
        "answer": Value("string"),
        "answer_format": Value("string"),
        "reasoning": Value("string"),
        "frames": List(Value("string")),
        "frame_timestamps": List(Value("float64")),
    }
)
