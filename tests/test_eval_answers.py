"""Answer extraction on the messy outputs real models write: letters, letter orders, event texts."""

import pytest

from recipes.model_io.answers import clean_output, event_texts, extract_letter, extract_order, parse_answer


OPTIONS = [
    "Reducing the hernia sac",
    "Fixing the mesh",
    "Closing the peritoneum",
    "Irrigating",
    "Placing a port",
    "Dividing the cord",
    "Suturing the skin",
]

LETTER_CASES = [
    ("B", "B"),
    ("b", "B"),
    ("(B)", "B"),
    ("B.", "B"),
    ("[C]", "C"),
    ("**D**", "D"),
    ("  e  \n", "E"),
    ("Answer: B. Fixing the mesh", "B"),
    ("answer: c", "C"),
    ("The answer is (C).", "C"),
    ("The correct option is D because the field is being irrigated.", "D"),
    ("Final answer: **G**", "G"),
    ("B. Fixing the mesh", "B"),
    ("(F) Dividing the cord", "F"),
    ("A - Reducing the hernia sac", "A"),
    ("B Fixing the mesh", "B"),
    ("Fixing the mesh", "B"),
    ("fixing the mesh.", "B"),
    ("The surgeon is irrigating the field.", "D"),  # the one option named
    ("It is not irrigating: the surgeon is fixing the mesh.", None),  # two named: ambiguous
    ("I think it is C.", "C"),
    ("I'd go with E", "E"),
    ("<think>A or B? The mesh is placed, so maybe A.</think>\nB", "B"),
    ("Let me think. Option A seems wrong. The answer is B.", "B"),
    ("A surgeon is reducing the hernia sac", "A"),  # the option text, not the article
    ("A surgeon performs a repair", None),
    ("Either A or B", None),
    ("H", None),  # out of range for 7 options
    ("", None),
    (None, None),
    ("Closing the peritoneum or suturing the skin", None),
]


@pytest.mark.parametrize(("output", "expected"), LETTER_CASES)
def test_letter_extraction(output, expected):
    assert extract_letter(output, OPTIONS) == expected


def test_option_text_nested_in_another_option_picks_the_longer():
    options = ["Stapling", "Stapling the stomach", "Suturing", "Irrigating"]
    assert extract_letter("The surgeon is stapling the stomach.", options) == "B"
    assert extract_letter("Stapling", options) == "A"


QUESTION = "Order these events as they occur. A: mesh placement B: incision of the peritoneum C: reduction of the sac"

ORDER_CASES = [
    ("B,C,A", ["B", "C", "A"]),
    ("B, C, A", ["B", "C", "A"]),
    ("b, c, a", ["B", "C", "A"]),
    ("B -> C -> A", ["B", "C", "A"]),
    ("B → C → A", ["B", "C", "A"]),
    ("BCA", ["B", "C", "A"]),
    ("bca", ["B", "C", "A"]),
    ("(B) (C) (A)", ["B", "C", "A"]),
    ("1. B\n2. C\n3. A", ["B", "C", "A"]),
    ("Event B, then event C, then event A.", ["B", "C", "A"]),
    ("B then C and finally A", ["B", "C", "A"]),
    ("**Answer:** C, B, A", ["C", "B", "A"]),
    ("At first I thought A, B, C but on reflection the order is B, A, C.", ["B", "A", "C"]),
    ("<think>maybe A,B,C</think>C,A,B", ["C", "A", "B"]),
    ("First the incision of the peritoneum, then reduction of the sac, then mesh placement.", ["B", "C", "A"]),
    ("B, C", None),  # not every event
    ("B, B, A", None),
    ("A, B, D", None),
    ("The events happen in the usual order.", None),
    ("", None),
]


@pytest.mark.parametrize(("output", "expected"), ORDER_CASES)
def test_order_extraction(output, expected):
    assert extract_order(output, 3, QUESTION) == expected


def test_event_texts_from_the_question():
    assert event_texts(QUESTION) == {
        "A": "mesh placement",
        "B": "incision of the peritoneum",
        "C": "reduction of the sac",
    }


def test_parse_answer_scores_each_format():
    mcq = {"question_id": "q1", "options": OPTIONS, "answer_format": "mcq"}
    assert parse_answer(mcq, "Answer: (A)", "A") == (parse_answer(mcq, "A", "A"))
    assert parse_answer(mcq, "Answer: (A)", "A").correct is True
    assert parse_answer(mcq, "A or B", "A").parsed is None and parse_answer(mcq, "A or B", "A").correct is False
    ordering = {"question": QUESTION, "options": [], "answer_format": "ordering", "answer_order": ["B", "C", "A"]}
    assert parse_answer(ordering, "B -> C -> A", "B,C,A").parsed == "B,C,A"
    assert parse_answer(ordering, "C, B, A", "B,C,A").correct is False
    summary = {"options": [], "answer_format": "open", "answer_order": []}
    parsed = parse_answer(summary, "<think>hm</think> **The sac is reduced,** then the mesh is placed.", "ref")
    assert parsed.parsed == "The sac is reduced, then the mesh is placed." and parsed.correct is None
    assert clean_output("<think>x</think>\n\n  ok ") == "ok"
