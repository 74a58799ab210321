"""The templating engine, grounded-answer parser and clip sampling on hand-made annotations."""

import itertools
import json

import pytest

from public_converters.clips import Clip, LabelTimeline, SamplingConfig, grounded_clips, spread, strategic_clips
from public_converters.fillers.image import gerund, region
from public_converters.grounded import GroundedAnswerError, parse_answer
from public_converters.items import ClipItem, Context, ImageItem
from public_converters.schema import Frame, Instance, Relation, Segment, Video
from public_converters.templating import load_templates, render


VOCAB = {
    "tool": ["clip applier", "electrocautery hook", "grasper"],
    "anatomy": ["gallbladder", "liver"],
    "phase": ["calot triangle dissection", "clipping and cutting", "preparation"],
    "verb": ["dissect", "grasp", "retract"],
    "target": ["gallbladder", "liver"],
}
CTX = Context("toy", "laparoscopic cholecystectomy", VOCAB, {"tool": {"grasper", "electrocautery hook"}})
ALL = {"has_phase", "has_tool_presence", "has_tool_bbox", "has_triplets", "has_anatomy_presence", "has_cvs"}


def image_item(**frame):
    video = Video("v1", "train", 25.0)
    instances = [
        Instance("v1", 50, "tool", "grasper", [100.0, 600.0, 300.0, 900.0]),
        Instance("v1", 50, "tool", "electrocautery hook", [600.0, 50.0, 900.0, 300.0]),
    ]
    relations = [Relation("v1", 50, "grasper", "retract", "gallbladder")]
    base = {"phase": "preparation", "tools": ["electrocautery hook", "grasper"], "anatomy": ["gallbladder"]}
    return ImageItem("toy", video, Frame("v1", 50, "f.png", **{**base, **frame}), instances, relations)


def by_template(qas):
    found = {}
    for qa in qas:
        found.setdefault(qa.template.id, []).append(qa)
    return found


def test_image_templates_render_facts_of_the_frame():
    qas = by_template(render(image_item(cvs=[1.0, 0.0, 2 / 3]), load_templates("image"), CTX, ALL))
    assert qas["tool_presence"][0].answer == "The visible instruments are: electrocautery hook and grasper."
    yes, no = qas["tool_presence_binary"]
    assert yes.answer.startswith("Yes") and no.answer == "No, there is no clip applier in this image."
    localisation = json.loads(qas["grounded_tool_localisation"][0].answer)
    assert [b["label"] for b in localisation] == ["electrocautery hook", "grasper"]  # top-to-bottom
    assert [b["index"] for b in localisation] == [1, 2]
    assert json.loads(qas["grounded_tool_presence"][0].answer) == {
        "clip applier": False,
        "electrocautery hook": True,
        "grasper": True,
    }
    assert "clip applier, electrocautery hook, grasper" in qas["grounded_tool_presence"][0].question
    assert qas["triplet_open"][0].answer == "The grasper is retracting the gallbladder."
    assert json.loads(qas["grounded_tool_count"][0].answer) == {"count": 2}
    criterion = qas["cvs_criterion"][0]  # C1 1.0 and C3 2/3 are met (majority of annotators), C2 0.0 is not
    expected = {"two structures": "Yes", "hepatocystic triangle cleared": "No", "cystic plate": "Yes"}
    name = next(n for n in expected if f"'{n}'" in criterion.question)
    assert criterion.answer.startswith(expected[name])
    assert qas["phase_open"][0].answer == "This image shows the preparation phase."
    for qa in qas["view_region"]:
        assert qa.answer in {
            "The grasper is in the lower left of the image.",
            "The electrocautery hook is in the upper right of the image.",
        }


def test_localisation_is_skipped_when_a_present_tool_has_no_box():
    item = image_item(tools=["clip applier", "grasper"])
    item.frame = Frame("v1", 50, "f.png", tools=["clip applier", "grasper"])
    item.instances = item.instances[:1]
    qas = by_template(
        render(item, load_templates("image"), Context("toy", "x", VOCAB, {"tool": {"clip applier", "grasper"}}), ALL)
    )
    assert "grounded_tool_localisation" not in qas and "tool_count" not in qas
    assert "tool_presence" in qas


def test_rendering_is_deterministic_and_both_versions_differ():
    first = render(image_item(), load_templates("image"), CTX, ALL)
    second = render(image_item(), load_templates("image"), CTX, ALL)
    assert [(q.question, q.instruction, q.answer) for q in first] == [
        (q.question, q.instruction, q.answer) for q in second
    ]
    assert all(q.question != q.instruction for q in first)


def test_grounded_parser_rejects_what_a_model_gets_wrong():
    vocab = {"tool": {"grasper"}, "phase": {"preparation"}}
    ok = '[{"index": 1, "label": "grasper", "box": [1, 2, 3, 4]}]'
    assert parse_answer("boxes", f"```json\n{ok}\n```", vocab, "tool")[0]["box"] == [1, 2, 3, 4]
    bad = {
        "boxes": [
            '[{"index": 2, "label": "grasper", "box": [1, 2, 3, 4]}]',
            '[{"index": 1, "label": "hook", "box": [1, 2, 3, 4]}]',
            '[{"index": 1, "label": "grasper", "box": [5, 2, 3, 4]}]',
            '[{"index": 1, "label": "grasper", "box": [1, 2, 3, 1004]}]',
        ],
        "label": ['{"phase": "closing"}', '{"step": "preparation"}', "preparation"],
        "presence": ['{"grasper": "yes"}', '{"hook": true}'],
        "count": ['{"count": -1}', '{"count": 1.5}'],
    }
    for shape, answers in bad.items():
        for answer in answers:
            with pytest.raises(GroundedAnswerError):
                parse_answer(shape, answer, vocab, "phase" if shape == "label" else "tool")


def test_gerunds_and_regions():
    assert [gerund(v) for v in ("grasp", "clip", "cut", "coagulate", "dissect", "pack")] == [
        "grasping",
        "clipping",
        "cutting",
        "coagulating",
        "dissecting",
        "packing",
    ]
    assert region([0, 0, 100, 100]) == "upper left" and region([400, 400, 600, 600]) == "centre"


# ---- clips ---------------------------------------------------------------------------------------------------------

VIDEO = Video("v1", "train", 25.0, 2500)
PHASES = [
    Segment("v1", "phase", "preparation", 0, 999),
    Segment("v1", "phase", "calot triangle dissection", 1000, 2499),
]
TOOLS = [Segment("v1", "tool", "grasper", 500, 1499)]


def test_grounded_windows_never_cross_a_label_change():
    clips, qualified = grounded_clips(VIDEO, PHASES, SamplingConfig(max_per_video=None), "toy")
    assert qualified == len(clips) > 0
    timeline = LabelTimeline(PHASES)
    for clip in clips:
        assert len(clip.frames) == 8 and clip.frames[1] - clip.frames[0] == 25
        assert timeline.constant_label(clip.start_frame, clip.end_frame) is not None
        assert not clip.start_frame <= 1000 - 1 < clip.end_frame  # never spans 999 -> 1000
    starts = [c.frames[0] for c in clips]
    assert all((b - a) % 100 == 0 for a, b in itertools.pairwise(starts))  # stride 4 frames at 1 fps


def test_strategic_clips_cover_the_transition_and_steady_states():
    clips = strategic_clips(VIDEO, PHASES, SamplingConfig(), "toy")
    transitions = [c for c in clips if c.anchor == "transition"]
    assert len(transitions) == 1 and transitions[0].start_frame < 1000 <= transitions[0].end_frame
    assert {c.anchor for c in clips} - {"transition"} <= {"beginning", "middle", "end"}
    for clip in clips:
        assert 8 * 25 <= clip.end_frame - clip.start_frame + 1 <= 30 * 25
    assert clips == strategic_clips(VIDEO, PHASES, SamplingConfig(), "toy")  # seeded


def test_transition_template_names_the_switch_time():
    clip = Clip("v1", 900, 1149, "strategic", "transition")
    item = ClipItem("toy", VIDEO, clip, PHASES + TOOLS, frozenset({"phase", "tool"}))
    qas = by_template(render(item, load_templates("clip"), CTX, {"has_phase", "has_tool_presence"}))
    expected = "from preparation to calot triangle dissection at about 4 s into the clip."
    assert qas["phase_transition_temporal"][0].answer.endswith(expected)  # frame 1000 is 100 frames = 4 s in
    assert qas["phase_descriptive"][0].answer.endswith(expected)
    assert qas["tool_usage"][0].answer == "The grasper is used throughout the clip."
    assert "grounded_clip_phase" not in qas  # a strategic clip gets no grounded question


def test_tool_interval_in_clip_seconds():
    clip = Clip("v1", 1400, 1649, "strategic", "middle")
    item = ClipItem("toy", VIDEO, clip, PHASES + TOOLS, frozenset({"phase", "tool"}))
    qas = by_template(render(item, load_templates("clip"), CTX, {"has_phase", "has_tool_presence"}))
    assert qas["tool_usage"][0].answer == "The grasper is used from 0 s to 4 s of the clip."


def test_spread_repeats_short_clips_to_four_frames():
    assert spread([5, 6], 8) == [5, 5, 6, 6]
    assert spread(list(range(100)), 8) == [6, 18, 31, 43, 56, 68, 81, 93]


def test_a_video_without_tool_annotation_gets_no_tool_questions():
    clip = Clip("v1", 1400, 1649, "strategic", "middle")
    item = ClipItem("toy", VIDEO, clip, PHASES, frozenset({"phase"}))
    qas = by_template(render(item, load_templates("clip"), CTX, {"has_phase", "has_tool_presence"}))
    assert "tool_binary" not in qas and "tool_usage" not in qas and "phase_binary" in qas


def test_articles_and_number_agree():
    qas = by_template(render(image_item(tools=["electrocautery hook"]), load_templates("image"), CTX, ALL))
    assert qas["tool_presence"][0].answer == "The visible instrument is: electrocautery hook."
    assert "an electrocautery hook" in qas["tool_presence_binary"][0].question


def test_grounded_windows_of_a_frame_folder_source_use_only_its_frames():
    video = Video("v1", "train", 25.0, 2500)  # no video file: frames ship as images, here every 2 s with a gap
    shipped = [f for f in range(0, 2500, 50) if not 1200 <= f < 2000]
    clips, _ = grounded_clips(video, PHASES, SamplingConfig(max_per_video=None), "toy", shipped)
    assert clips and all(set(c.frames) <= set(shipped) for c in clips)
    assert all(c.end_frame - c.start_frame <= 2 * 25 * 7 for c in clips)  # no window across the 32 s gap
