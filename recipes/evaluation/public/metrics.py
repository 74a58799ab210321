"""Public perception benchmark metrics (the Sureon paper, Appendix D.3), on per-query prediction records.

- Phase / step / action recognition, two conventions side by side:
  - the Sureon paper's (Table 5 (a) and (b)): video-averaged macro-F1, i.e. macro-F1 within each video, averaged over
    videos (so long videos do not dominate); accuracy, macro-precision and macro-recall video-averaged the same way.
    Within a video the classes are those of its references and of its in-set predictions (scikit-learn's ``labels``
    union), so a phase predicted but absent from the video's ground truth counts 0 in that video's precision, recall
    and F1.
  - the Cholec80 / M2CAI challenge evaluation script's (``Main.m`` and ``Evaluate.m``, credited to the M2CAI 2016
    challenge, camma.u-strasbg.fr/m2cai2016, as copied in e.g. github.com/YuemingJin/TMRNet
    ``code/eval/result/matlab-eval``), which many published Cholec80 tables use: per phase per video,
    Jaccard = TP / |prediction or truth is the phase|, precision = TP / |predicted as the phase| and recall = TP /
    |truth is the phase|; a phase absent from a video's ground truth is left out of that video (all three are NaN in
    the script, skipped by ``nanmean``), and so is the precision of a phase present but never predicted (0 / 0);
    then the mean over videos per phase, then the mean over phases. Accuracy is the per-video accuracy averaged
    over videos, the same number in both conventions. The script also has a "relaxed boundary" mode (10 s around
    each ground-truth transition forgiven, with Cholec80-specific rules for phases 4-7, values above 100 clipped);
    it is not computed here: it needs every frame of a video at a known rate, while the benchmark's rows are
    independent queries that a run may subset (``--limit``), and relaxed numbers are not comparable with the strict
    ones most tables print (Funke et al. 2023, "Metrics Matter in Surgical Phase Recognition", arXiv 2305.13961,
    on how these details vary between studies; TeCNO's own code, github.com/tobiascz/TeCNO
    ``utils/metric_helper.py``, takes each video's classes from truth and prediction and counts an undefined value
    as 0, nearer the Sureon paper's convention). Where the script would print NaN (a phase in no video's ground truth,
    e.g. on a subset) the phase is left out of the mean over phases and the count of phases is reported.
  The classes are the benchmark's closed label set (the rows' ``labels``, which ``sureon eval public`` copies into
  each record); an unparseable or out-of-set prediction is a miss, never a class of its own, and a reference
  outside the set is an error. Records that do not carry their label set are scored over the labels their
  references use, and the report says so. Labels compare case-, space-, "_"- and "-"-insensitively
  ("CalotTriangleDissection" = "calot triangle dissection").
- Endoscapes critical view of safety: each criterion (C1-C3) a binary question; accuracy per criterion and the
  macro-average over criteria.
- Tool localisation: mAP50 = COCO box AP at IoU 0.50 (pycocotools), every predicted box with the same constant score
  (generative models give none), so ties fall back to image order (images sorted by video and frame) and the
  model's box order. The class universe is the references' class names; predicted labels are canonicalised
  (lowercase, "_"/"-"/whitespace as one space, trivial plurals "s"/"es") and a label outside the universe is
  ignored, as COCO ignores unknown categories (counted in the output).
- Clip inputs: :func:`clip_window`, 8 frames at stride 4 ending on the keyframe (online setting).
- Exclusions: the Sureon paper drops 17 Cholec80 videos that overlap training sources (Endoscapes, CholecT50) from
  Cholec80 clip evaluation but does not name them, so the list is the user's: :func:`read_video_list`.

Boxes are ``[x_min, y_min, x_max, y_max]`` in pixels of the evaluated frame; converting a model's own coordinates
(e.g. Qwen's 0-1000 grid) is the runner's job.
"""

import contextlib
import io
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from builders.errors import InputError
from recipes.model_io.answers import canonical_label, label_key


CLIP_FRAMES = 8
CLIP_STRIDE = 4
CVS_CRITERIA = ("C1", "C2", "C3")
_YES = {"yes", "true", "1", "y"}
_NO = {"no", "false", "0", "n"}


# ---- clips and exclusions --------------------------------------------------------------------------------------


def clip_window(
    frame_ids: Sequence[int], keyframe: int, size: int = CLIP_FRAMES, stride: int = CLIP_STRIDE, pad: bool = False
) -> list[int]:
    """The online clip of ``keyframe``: up to ``size`` frames, ``stride`` apart, the keyframe last.

    ``frame_ids`` are the extracted frames of the video in order (e.g. one per second: 0, 25, 50, ... at 25 fps), so
    the stride counts extracted frames (8 frames at stride 4 span 28 s at 1 fps). Near the start of a video fewer
    frames precede the keyframe: the window is shorter, or with ``pad`` the earliest frame repeats to fill it.
    """
    ids = list(frame_ids)
    try:
        position = ids.index(keyframe)
    except ValueError:
        raise InputError(f"keyframe {keyframe} is not among the video's extracted frames") from None
    window = [ids[p] for p in range(position, -1, -stride)][:size][::-1]
    if pad:
        window = [window[0]] * (size - len(window)) + window
    return window


def read_video_list(path: str | Path) -> list[str]:
    """Video ids from a text file: one per line, ``#`` starts a comment, blank lines ignored."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such video list")
    ids = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    ids = [video for video in ids if video]
    repeated = sorted({video for video in ids if ids.count(video) > 1})
    if repeated:
        raise InputError(f"{path}: video ids listed twice: {', '.join(repeated)}")
    return ids


# ---- labels ----------------------------------------------------------------------------------------------------


def match_label(predicted: str, universe: Iterable[str]) -> str | None:
    """The universe class a predicted label names (canonical form, then trivial plural / singular), or None."""
    classes = set(universe)
    text = canonical_label(predicted)
    candidates = [text, text + "s", text + "es"]
    if text.endswith("es"):
        candidates.append(text[:-2])
    if text.endswith("s"):
        candidates.append(text[:-1])
    return next((c for c in candidates if c in classes), None)


def parse_yes_no(value) -> bool | None:
    """``True``/``False`` from a boolean or a yes/no-like string; None when it is neither."""
    if isinstance(value, bool):
        return value
    if value is None:
        return None
    text = str(value).strip().strip(".").lower()
    return True if text in _YES else False if text in _NO else None


# ---- recognition -----------------------------------------------------------------------------------------------


def video_averaged_scores(
    video_ids: Sequence[str],
    references: Sequence[str],
    predictions: Sequence[str | None],
    labels: Sequence[str] | None = None,
) -> dict:
    """The Sureon paper's video-averaged macro-F1, accuracy, macro-precision and macro-recall (percent), and under
    ``challenge`` the challenge script's precision, recall and Jaccard (see the module docstring).

    ``labels`` is the benchmark's closed label set; None scores over the labels the references use
    (``label_set`` says which was used)."""
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    if not len(video_ids) == len(references) == len(predictions):
        raise InputError("video ids, references and predictions differ in length")
    if not references:
        raise InputError("no frames to score")
    names = {label_key(r): str(r) for r in (references if labels is None else labels)}
    outside = sorted({str(r) for r in references if label_key(r) not in names})
    if outside:
        raise InputError(f"reference label(s) {outside} are not in the label set {sorted(names.values())}")
    by_video: dict[str, tuple[list[str], list[str | None]]] = defaultdict(lambda: ([], []))
    for video, reference, prediction in zip(video_ids, references, predictions, strict=True):
        truth, guess = by_video[str(video)]
        truth.append(names[label_key(reference)])
        guess.append(names.get(label_key(prediction)) if prediction is not None else None)
    per_video = {}
    for video in sorted(by_video):
        truth, guess = by_video[video]
        classes = sorted(set(truth) | {g for g in guess if g is not None})
        guess = [g if g is not None else "\x00miss" for g in guess]  # counts wrong, belongs to no class
        kwargs = {"labels": classes, "average": "macro", "zero_division": 0}
        per_video[video] = {
            "frames": len(truth),
            "f1": 100.0 * f1_score(truth, guess, **kwargs),
            "accuracy": 100.0 * accuracy_score(truth, guess),
            "precision": 100.0 * precision_score(truth, guess, **kwargs),
            "recall": 100.0 * recall_score(truth, guess, **kwargs),
        }
    scores = {m: float(np.mean([v[m] for v in per_video.values()])) for m in ("f1", "accuracy", "precision", "recall")}
    misses = sum(p is None or label_key(p) not in names for p in predictions)
    return scores | {
        "videos": len(per_video),
        "frames": len(references),
        "misses": misses,
        "label_set": "references" if labels is None else "benchmark",
        "classes": len(names),
        "per_video": per_video,
        "challenge": challenge_scores(by_video, sorted(names.values())),
    }


def challenge_scores(by_video: dict[str, tuple[list[str], list[str | None]]], classes: Sequence[str]) -> dict:
    """Precision, recall and Jaccard (percent) as the Cholec80 / M2CAI challenge script computes them (strict
    boundaries): per phase per video over the phases of the video's ground truth, mean over videos per phase, mean
    over phases. ``by_video``: video -> (references, predictions) as canonical class names, None for a miss."""
    cells: dict[str, dict[str, list[float]]] = {c: {"precision": [], "recall": [], "jaccard": []} for c in classes}
    for truth, guess in by_video.values():
        for phase in classes:
            in_truth = sum(t == phase for t in truth)
            if not in_truth:  # the script's NaN: the phase is left out of this video
                continue
            predicted = sum(g == phase for g in guess)
            hits = sum(t == g == phase for t, g in zip(truth, guess, strict=True))
            cells[phase]["recall"].append(100.0 * hits / in_truth)
            cells[phase]["jaccard"].append(100.0 * hits / (in_truth + predicted - hits))
            if predicted:  # 0 / 0 is NaN in the script: never predicted leaves precision undefined here
                cells[phase]["precision"].append(100.0 * hits / predicted)
    per_phase = {
        phase: {"videos": len(values["recall"])} | {m: float(np.mean(v)) if v else None for m, v in values.items()}
        for phase, values in cells.items()
        if values["recall"]
    }
    overall = {
        m: float(np.mean([p[m] for p in per_phase.values() if p[m] is not None]))
        if any(p[m] is not None for p in per_phase.values())
        else None
        for m in ("precision", "recall", "jaccard")
    }
    return overall | {"phases": len(per_phase), "per_phase": per_phase}


# ---- critical view of safety -----------------------------------------------------------------------------------


def cvs_accuracy(criteria: Sequence[str], references: Sequence[bool], predictions: Sequence[bool | None]) -> dict:
    """Accuracy per criterion and their macro-average (percent); an unparseable answer (None) is wrong."""
    if not len(criteria) == len(references) == len(predictions):
        raise InputError("criteria, references and predictions differ in length")
    per: dict[str, list[bool]] = defaultdict(list)
    for criterion, reference, prediction in zip(criteria, references, predictions, strict=True):
        per[criterion].append(prediction is not None and prediction == reference)
    if not per:
        raise InputError("no CVS answers to score")
    order = [c for c in CVS_CRITERIA if c in per] + sorted(set(per) - set(CVS_CRITERIA))
    accuracy = {c: 100.0 * float(np.mean(per[c])) for c in order}
    return {
        "per_criterion": accuracy,
        "n": {c: len(per[c]) for c in order},
        "macro": float(np.mean(list(accuracy.values()))),
        "misses": sum(p is None for p in predictions),
    }


# ---- tool localisation -----------------------------------------------------------------------------------------


def _xywh(box: Sequence[float]) -> list[float]:
    x1, y1, x2, y2 = (float(v) for v in box)
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    return [x1, y1, x2 - x1, y2 - y1]


def map50(images: Sequence[dict], score: float = 1.0) -> dict:
    """COCO AP at IoU 0.50 over ``images``: dicts of ``references`` and ``predictions``, lists of (label, xyxy box).

    ``predictions`` may be None (unparseable output: no boxes). Returns mAP50 and AP50 per class, in percent.
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    universe = sorted({canonical_label(label) for image in images for label, _ in image["references"]})
    if not universe:
        raise InputError("no reference boxes: mAP50 needs at least one ground-truth box")
    category = {name: i + 1 for i, name in enumerate(universe)}
    annotations, detections, ignored = [], [], 0
    for image_id, image in enumerate(images, start=1):
        for label, box in image["references"]:
            xywh = _xywh(box)
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category[canonical_label(label)],
                    "bbox": xywh,
                    "area": xywh[2] * xywh[3],
                    "iscrowd": 0,
                }
            )
        for label, box in image["predictions"] or []:
            matched = match_label(label, universe)
            if matched is None:
                ignored += 1
                continue
            detections.append(
                {"image_id": image_id, "category_id": category[matched], "bbox": _xywh(box), "score": score}
            )
    ground_truth = COCO()
    ground_truth.dataset = {
        "images": [{"id": i} for i in range(1, len(images) + 1)],
        "annotations": annotations,
        "categories": [{"id": i, "name": name} for name, i in category.items()],
    }
    per_class = {name: 0.0 for name in universe}
    if detections:
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
            ground_truth.createIndex()
            evaluation = COCOeval(ground_truth, ground_truth.loadRes(detections), "bbox")
            most = max(len(image["predictions"] or []) for image in images)
            evaluation.params.maxDets = [1, 10, max(100, most)]  # never drop a box for lack of a score
            evaluation.evaluate()
            evaluation.accumulate()
        precision = evaluation.eval["precision"][0, :, :, 0, -1]  # IoU 0.50, all recalls, all classes, all areas
        for k, name in enumerate(universe):
            curve = precision[:, k]
            per_class[name] = 100.0 * float(curve[curve > -1].mean()) if (curve > -1).any() else 0.0
    return {
        "map50": float(np.mean(list(per_class.values()))),
        "per_class": per_class,
        "images": len(images),
        "predicted_boxes": len(detections) + ignored,
        "ignored_labels": ignored,
        "reference_boxes": len(annotations),
        "misses": sum(image["predictions"] is None for image in images),
    }
