import pytest

from builders.sureon.categories import BY_CODE, CATEGORIES, MCQ, resolve_category
from builders.sureon.clips import ClipIdError, format_clock, parse_clip_id, parse_seconds


@pytest.mark.parametrize(
    ("clip_id", "source_id", "slug", "start", "end"),
    [
        # the two examples from the project site
        (
            "0HVStP-z1m8_decision_reasoning_00-11-36.01_00-11-43.99",
            "0HVStP-z1m8",
            "decision_reasoning",
            696.01,
            703.99,
        ),
        (
            "0c0368222999f0438acd67df0e414a9f_safety_00-16-49.370_00-17-02.215",
            "0c0368222999f0438acd67df0e414a9f",
            "safety",
            1009.37,
            1022.215,
        ),
        # "_" as the decimal separator, with a multi-underscore slug
        (
            "aB3_dE-5fGh_pa_action_description_00-11-14_767_00-11-20_5",
            "aB3_dE-5fGh",
            "pa_action_description",
            674.767,
            680.5,
        ),
        # a YouTube id that itself holds "_" and "-", and times without decimals
        ("_a-b_c-d_e__forecast_cot_01-02-03_01-04-05", "_a-b_c-d_e_", "forecast_cot", 3723.0, 3845.0),
        # a hash id with "_" decimals
        (
            "9F1E2D3C4B5A69788796A5B4C3D2E1F0_temporal_ordering_00-18-17_00_00-29-49_50",
            "9F1E2D3C4B5A69788796A5B4C3D2E1F0",
            "temporal_ordering",
            1097.0,
            1789.5,
        ),
    ],
)
def test_parse_clip_id(clip_id, source_id, slug, start, end):
    ref = parse_clip_id(clip_id)
    assert (ref.source_id, ref.category_slug) == (source_id, slug)
    assert ref.start == pytest.approx(start) and ref.end == pytest.approx(end)


@pytest.mark.parametrize(
    ("clip_id", "message"),
    [
        ("short_safety_00-00-01.00_00-00-02.00", "YouTube id or a 32-hex hash"),
        ("aB3_dE-5fGh_safety_00-00-01.00", "does not end in"),
        ("aB3_dE-5fGh_safety_00-00-09.00_00-00-02.00", "ends (2.0s) before it starts"),
        ("aB3_dE-5fGh__00-00-01.00_00-00-02.00", "does not end in"),
    ],
)
def test_parse_clip_id_errors_say_what_is_wrong(clip_id, message):
    with pytest.raises(ClipIdError, match="clip_id") as err:
        parse_clip_id(clip_id)
    assert message in str(err.value)
    assert clip_id in str(err.value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(12, 12.0), (3.5, 3.5), ("42.25", 42.25), ("1:02:03.5", 3723.5), ("02:03", 123.0), ("00-01-02_50", 62.5)],
)
def test_parse_seconds(value, seconds):
    assert parse_seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", True, "1:2:3:4"])
def test_parse_seconds_rejects_non_times(value):
    with pytest.raises(ValueError, match="not a time"):
        parse_seconds(value)


def test_format_clock_round_trips_through_parse_seconds():
    for seconds in (0.0, 59.99, 754.25, 3723.5):
        assert parse_seconds(format_clock(seconds)) == pytest.approx(seconds)


RELEASE_SLUGS = {  # the twelve slugs of the project site's clip files
    "local_action_reasoning": "LAR",
    "temporal_ordering": "TO",
    "forecast_cot": "F",
    "action_description": "AD",
    "object_existence": "EE",
    "safety": "SPI",
    "instrument_action_interaction": "IAI",
    "object_attribute": "EA",
    "pa_action_description": "PAD",
    "sequence_summarization": "SM",
    "decision_reasoning": "decision_reasoning",
    "object_localization": "object_localization",
}


@pytest.mark.parametrize(("slug", "expected"), sorted(RELEASE_SLUGS.items()))
def test_release_slugs_map_to_paper_codes_and_unknowns_keep_their_name(slug, expected):
    category, known = resolve_category(slug)
    assert category == expected
    assert (known is None) == (expected not in BY_CODE)


@pytest.mark.parametrize("spelling", ["EE", "ee", "Entity Existence", "object-existence", " object_existence "])
def test_category_aliases(spelling):
    assert resolve_category(spelling)[0] == "EE"


def test_category_table_matches_the_paper():
    assert len(CATEGORIES) == 10
    short = {c.code for c in CATEGORIES if c.granularity == "short-window"}
    assert short == {"AD", "EE", "EA", "PAD", "IAI", "LAR", "SPI"}  # Table 2: 7 short-window / 3 long-horizon
    assert {c.code for c in CATEGORIES if c.answer_format == MCQ} == short | {"F"}  # 8 MCQ / 2 open-ended
    assert {c.code for c in CATEGORIES if c.group == "perception"} == {"AD", "EE", "EA", "PAD", "IAI"}
    assert {c.code for c in CATEGORIES if not c.accuracy_scored} == {"SM"}  # 299 scored + 41 SM on the benchmark
