"""A planned question as a release row: its question text, its lettered options and its answer, with the text of
its planted shortcut or decoy.

Options are as the release has them (``docs/release_format.md``): 4 on train and validation, 7 on test, distractors
from the same seven-word vocabulary, shuffled by a seeded rng; TO and SM have none. A ``narrated`` row or decoy
opens with ``NARRATION_CUE``. ``option_order: vocabulary``
lists the options in the vocabulary's order instead: a two-layer model learns "this colour, this letter" on a CPU in a
few hundred steps, while pointing at a shuffled option by its content takes it thousands (measured: 300 steps of the
tiny recipe on shuffled options stay at chance), so the project's CPU learning checks use it.
"""

import random

from builders.options import LETTERS, stable_seed
from builders.sureon.categories import BY_CODE
from builders.sureon.release import release_row
from builders.sureon.world.config import AT_LETTER_KINDS, WorldConfig
from builders.sureon.world.planning import Question, answer_letters
from builders.sureon.world.vocabulary import (
    ELABORATION,
    INSTRUMENTS,
    NARRATION_CUE,
    NARRATOR_REMARK,
    PHASES,
    QUESTIONS,
    VOCABULARY,
)


def _options(config: WorldConfig, q: Question) -> tuple[list[str], str]:
    """The lettered option texts and the correct one: distractors from the vocabulary, shuffled by a seeded rng."""
    vocabulary = VOCABULARY[q.code]
    count = int(config.options[q.split])
    rng = random.Random(stable_seed(str(config.seed), q.question_id, "options"))
    letter = LETTERS.index(config.position_letter)
    at_letter = q.shortcut in AT_LETTER_KINDS
    if config.option_order == "vocabulary" and (at_letter or q.decoy == "narrated"):
        # the answer's letter is the number of distractors below its word: at the letter, the answer is the word
        # there (planning) and every word before it is an option; a narrated decoy's lies elsewhere
        if at_letter:
            below = list(range(q.answer_index))
        else:
            below = rng.sample(
                range(q.answer_index), rng.choice([k for k in answer_letters(config, q) if k != letter])
            )
        distractors = below + rng.sample(range(q.answer_index + 1, 7), count - 1 - len(below))
    else:
        distractors = rng.sample([i for i in range(7) if i != q.answer_index], count - 1)
    correct = vocabulary[q.answer_index] + (ELABORATION if q.shortcut == "length" else "")
    decoy = rng.choice(distractors) if q.decoy == "length" else None
    words = [w + (ELABORATION if i == decoy else "") for i, w in enumerate(vocabulary)]
    if config.option_order == "vocabulary":
        chosen = sorted([*distractors, q.answer_index])
        return [correct if i == q.answer_index else words[i] for i in chosen], correct
    texts = [words[i] for i in distractors]
    if at_letter:
        position = letter
    elif q.decoy == "narrated":
        position = rng.choice([k for k in range(count) if k != letter])
    else:
        position = rng.randrange(count)
    texts.insert(position, correct)
    return texts, correct


def question_row(config: WorldConfig, q: Question) -> dict:
    """The release row of ``q`` (after its clip window is laid out), in the official layout."""
    procedure, specialty, subject = q.procedure
    slug = BY_CODE[q.code].slug
    instrument = INSTRUMENTS[q.scene.get("colour", 0)].lower()
    texts, answer = [], ""
    if q.code in ("TO", "SM"):
        shown = q.scene["phases"]
        letters = random.Random(stable_seed(str(config.seed), q.question_id, "events")).sample(range(3), 3)
        # letters[k]: the event letter of the k-th phase shown
        events = {LETTERS[letters[k]]: PHASES[phase] for k, phase in enumerate(shown)}
        a, b, c = (events[letter].lower() for letter in "ABC")
        question = QUESTIONS[q.code].format(procedure=procedure, a=a, b=b, c=c)
        if q.code == "TO":
            answer = ",".join(LETTERS[letters[k]] for k in range(3))
        else:
            answer = ", then ".join(PHASES[phase] for phase in shown) + "."
    else:
        question = QUESTIONS[q.code].format(procedure=procedure, instrument=instrument)
        texts, answer = _options(config, q)
        if q.shortcut == "wording":
            question += NARRATOR_REMARK.format(answer=answer.lower())
        if "narrated" in (q.shortcut, q.decoy):
            question = NARRATION_CUE + question[0].lower() + question[1:]
    return release_row(
        question_id=q.question_id,
        source_id=q.source_id,
        category=slug,
        start=q.start,
        end=q.end,
        question=question,
        answer=answer,
        option_texts=texts,
        topic=(specialty, subject, procedure.capitalize()),
        narration="We continue with this part of the procedure.",
    )
