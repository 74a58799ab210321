"""Write the small synthetic Sureon release shipped in ``sample_data/sureon_release`` (the Hub layout as downloaded).

Shaped like the official annotation-only release as far as it is known (``docs/release_format.md``):
``question_id``, ``clip_id`` (``<source_id>_<category>_<HH-MM-SS.ss>_<HH-MM-SS.ss>``, one with ``_`` decimals, one
with a 32-hex source id), ``passes_blind_curation`` (true / false / null), options as ``{letter, text, correct}``
structs (4 on train / validation as on the website, 7 on test as in the paper), the answer as option text, temporal
ordering as a letter order, metadata, transcript and reasoning. All ten categories appear in every split, plus one
slug outside the ten (``object_localization``). Two test questions share a clip; one test question's video
(``MissingVid1``) is not among the sample videos.

    python sample_data/make_sample_release.py --out sample_data/sureon_release
"""

import argparse
import random
from pathlib import Path

import pyarrow as pa

from builders.sureon.release import RELEASE_SCHEMA, release_row, write_release_splits


# fmt: off
# (split, source_id, slug, start, end, question, correct answer, distractors, passes_blind_curation, time separator)
QUESTIONS = [
    # train: aB3_dE-5fGh (cholecystectomy), Zx9Qw_8eRt1 (hemicolectomy), 0c03... (hysterectomy)
    ("train", "aB3_dE-5fGh", "action_description", 3.2, 9.8, "What action is being performed in this clip?",
     "Dissecting tissue", ["Irrigating the field", "Clipping a vessel", "Suturing"], True, "."),
    ("train", "aB3_dE-5fGh", "object_existence", 12.0, 18.5, "Which structure is visible in the operative field?",
     "Gallbladder", ["Appendix", "Spleen", "Uterus"], True, "."),
    ("train", "aB3_dE-5fGh", "object_attribute", 20.25, 26.75, "What is the state of the cystic duct?",
     "Clipped", ["Transected", "Dilated", "Inflamed"], False, "."),
    ("train", "aB3_dE-5fGh", "pa_action_description", 30.0, 35.5, "Which action best describes this clip?",
     "Cutting", ["Grasping", "Retracting", "Cauterizing"], True, "."),
    ("train", "aB3_dE-5fGh", "instrument_action_interaction", 40.1, 47.9,
     "What is the hook electrode used for in this clip?",
     "Dissecting the peritoneum", ["Retracting the liver", "Irrigating", "Clipping the artery"], None, "."),
    ("train", "aB3_dE-5fGh", "local_action_reasoning", 50.0, 58.0, "Why is the gallbladder retracted laterally?",
     "To open Calot's triangle", ["To stop bleeding", "To remove the specimen", "To insert a port"], True, "."),
    ("train", "aB3_dE-5fGh", "safety", 60.5, 68.0, "Which safety practice is shown in this clip?",
     "Achieving the critical view of safety", ["Checking port sites", "Counting sponges", "Leak testing"], True, "."),
    ("train", "aB3_dE-5fGh", "forecast_cot", 5.0, 70.0, "What is the next step of the procedure?",
     "Clipping the cystic artery", ["Closing the fascia", "Extracting the specimen", "Port placement"], True, "."),
    ("train", "aB3_dE-5fGh", "temporal_ordering", 2.0, 80.0,
     ("Order these events as they occur. A: clipping of the cystic duct B: dissection of Calot's triangle "
      "C: retraction of the gallbladder fundus"), "C,B,A", [], True, "."),
    ("train", "aB3_dE-5fGh", "sequence_summarization", 10.0, 75.0, "Summarize the sequence of surgical steps.",
     "The fundus is retracted, Calot's triangle is dissected, and the cystic duct and artery are clipped.", [],
     None, "."),
    ("train", "Zx9Qw_8eRt1", "action_description", 4.0, 11.0, "What action is being performed?",
     "Mobilizing the colon", ["Stapling the bowel", "Closing the mesentery", "Irrigating"], True, "_"),
    ("train", "Zx9Qw_8eRt1", "object_existence", 15.5, 22.0, "Which instrument is visible?",
     "Vessel sealer", ["Suction irrigator", "Stapler", "Needle driver"], False, "."),
    ("train", "Zx9Qw_8eRt1", "safety", 30.0, 39.0, "What safety step is shown before dividing the vessel?",
     "Identifying the ureter", ["Checking the pneumoperitoneum", "Marking the margin", "Counting needles"], True, "."),
    ("train", "Zx9Qw_8eRt1", "temporal_ordering", 1.0, 85.0,
     ("Order these events as they occur. A: division of the ileocolic pedicle B: medial-to-lateral mobilization "
      "C: creation of the anastomosis"), "B,A,C", [], False, "."),
    ("train", "Zx9Qw_8eRt1", "object_localization", 50.0, 56.0, "Where is the stapler in the frame?",
     "Right side of the screen", ["Left side of the screen", "Top of the screen", "Center of the screen"], None, "."),
    ("train", "0c0368222999f0438acd67df0e414a9f", "object_attribute", 6.0, 13.37, "What is the color of the uterus?",
     "Pink", ["Dark purple", "White", "Yellow"], True, "."),
    ("train", "0c0368222999f0438acd67df0e414a9f", "local_action_reasoning", 20.0, 28.0,
     "Why is the uterine manipulator pushed cephalad?", "To delineate the vaginal fornices",
     ["To control bleeding", "To evacuate smoke", "To inspect the ovaries"], None, "."),
    ("train", "0c0368222999f0438acd67df0e414a9f", "pa_action_description", 40.0, 45.5,
     "Which action best describes this clip?", "Coagulating", ["Suturing", "Stapling", "Irrigating"], True, "."),
    ("train", "0c0368222999f0438acd67df0e414a9f", "instrument_action_interaction", 50.0, 57.0,
     "What is the bipolar forceps doing?", "Sealing the uterine artery",
     ["Grasping the ovary", "Retracting the bladder", "Cutting the cuff"], True, "."),
    ("train", "0c0368222999f0438acd67df0e414a9f", "sequence_summarization", 5.0, 85.0,
     "Summarize the sequence of surgical steps.",
     "The round ligament is divided, the bladder flap is developed, and the uterine vessels are sealed.", [],
     True, "."),
    # validation: Vq2-Lm7Np0s (sleeve gastrectomy)
    ("validation", "Vq2-Lm7Np0s", "action_description", 2.0, 8.0, "What action is being performed?",
     "Stapling the stomach", ["Suturing the crura", "Irrigating", "Dividing the omentum"], True, "."),
    ("validation", "Vq2-Lm7Np0s", "object_existence", 10.0, 16.0, "Which structure is visible?",
     "Gastroepiploic vessels", ["Gallbladder", "Appendix", "Ureter"], False, "."),
    ("validation", "Vq2-Lm7Np0s", "object_attribute", 18.0, 24.0, "What is the state of the staple line?",
     "Hemostatic", ["Bleeding", "Leaking", "Reinforced with mesh"], True, "."),
    ("validation", "Vq2-Lm7Np0s", "pa_action_description", 26.0, 31.0, "Which action best describes this clip?",
     "Stapling", ["Suturing", "Grasping", "Irrigating"], None, "."),
    ("validation", "Vq2-Lm7Np0s", "instrument_action_interaction", 33.0, 40.0, "What is the bougie used for?",
     "Calibrating the sleeve", ["Retracting the liver", "Suctioning", "Irrigating"], True, "."),
    ("validation", "Vq2-Lm7Np0s", "local_action_reasoning", 42.0, 49.0, "Why is the omentum divided?",
     "To expose the greater curvature", ["To control bleeding", "To remove the specimen", "To close a defect"],
     True, "."),
    ("validation", "Vq2-Lm7Np0s", "safety", 51.0, 58.0, "Which safety practice is shown?",
     "Checking the staple line for bleeding", ["Counting sponges", "Confirming port position", "Marking the margin"],
     False, "."),
    ("validation", "Vq2-Lm7Np0s", "forecast_cot", 3.0, 60.0, "What is the next step?",
     "Leak testing the staple line", ["Port placement", "Dividing the short gastrics", "Closing the skin"],
     True, "."),
    ("validation", "Vq2-Lm7Np0s", "temporal_ordering", 1.0, 88.0,
     ("Order these events as they occur. A: firing of the first stapler B: division of the gastrocolic ligament "
      "C: extraction of the specimen"), "B,A,C", [], True, "."),
    ("validation", "Vq2-Lm7Np0s", "sequence_summarization", 4.0, 86.0, "Summarize the sequence of surgical steps.",
     "The greater curvature is freed, the sleeve is stapled over a bougie, and the staple line is checked.", [],
     None, "."),
    # test: Tt4Kk9Jj2Hh (inguinal hernia), 9f1e... (nephrectomy), MissingVid1 (no video shipped)
    ("test", "Tt4Kk9Jj2Hh", "action_description", 2.5, 10.5, "What action is being performed?",
     "Reducing the hernia sac", ["Fixing the mesh", "Closing the peritoneum", "Irrigating", "Placing a port",
                                 "Dividing the cord", "Suturing the skin"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "object_existence", 12.0, 19.0, "Which structure is visible?",
     "Inferior epigastric vessels", ["Gallbladder", "Uterus", "Appendix", "Spleen", "Kidney", "Ureter"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "object_existence", 12.0, 19.0, "Which instrument is visible?",
     "Atraumatic grasper", ["Stapler", "Vessel sealer", "Clip applier", "Needle driver", "Suction irrigator",
                            "Hook electrode"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "object_attribute", 21.0, 28.0, "What is the state of the peritoneal flap?",
     "Incised", ["Intact", "Bleeding", "Sutured", "Stapled", "Inflamed", "Necrotic"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "pa_action_description", 30.0, 34.0, "Which action best describes this clip?",
     "Grasping", ["Cutting", "Stapling", "Suturing", "Irrigating", "Clipping", "Cauterizing"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "forecast_cot", 5.0, 60.0, "What is the next step?",
     "Placing the mesh", ["Closing the fascia", "Reducing the sac", "Extracting the specimen", "Port placement",
                          "Irrigating", "Dividing the vas"], None, "."),
    ("test", "Tt4Kk9Jj2Hh", "temporal_ordering", 1.0, 88.0,
     "Order these events as they occur. A: mesh placement B: incision of the peritoneum C: reduction of the sac",
     "B,C,A", [], None, "."),
    ("test", "9f1e2d3c4b5a69788796a5b4c3d2e1f0", "instrument_action_interaction", 6.0, 13.0,
     "What is the stapler used for?", "Dividing the renal vein",
     ["Closing the fascia", "Sealing the ureter", "Dividing the bowel", "Reinforcing a suture", "Retracting",
      "Clipping the artery"], None, "_"),
    ("test", "9f1e2d3c4b5a69788796a5b4c3d2e1f0", "local_action_reasoning", 20.0, 27.5,
     "Why is the colon mobilized medially?", "To expose the kidney",
     ["To control bleeding", "To remove the specimen", "To insert a port", "To check the anastomosis",
      "To evacuate smoke", "To find the appendix"], None, "."),
    ("test", "9f1e2d3c4b5a69788796a5b4c3d2e1f0", "safety", 40.0, 47.0, "Which safety practice is shown?",
     "Clipping the artery before the vein", ["Counting sponges", "Leak testing", "Confirming port position",
                                             "Checking the mesh", "Marking the margin", "Irrigating"], None, "."),
    ("test", "9f1e2d3c4b5a69788796a5b4c3d2e1f0", "sequence_summarization", 3.0, 85.0,
     "Summarize the sequence of surgical steps.",
     "The colon is mobilized, the hilum is exposed, and the artery and vein are divided in turn.", [], None, "."),
    ("test", "MissingVid1", "action_description", 5.0, 12.0, "What action is being performed?",
     "Suturing the vaginal cuff", ["Stapling", "Irrigating", "Dividing the ligament", "Placing a port",
                                   "Retracting the bladder", "Coagulating"], None, "."),
]
# fmt: on

TOPICS = {
    "aB3_dE-5fGh": ("General Surgery", "Hepatobiliary", "Cholecystectomy"),
    "Zx9Qw_8eRt1": ("Colorectal", "Colon", "Hemicolectomy - Right"),
    "0c0368222999f0438acd67df0e414a9f": ("Gynecology", "Uterus", "Hysterectomy"),
    "Vq2-Lm7Np0s": ("General Surgery", "Bariatric", "Sleeve gastrectomy"),
    "Tt4Kk9Jj2Hh": ("General Surgery", "Hernia", "Inguinal hernia repair (TEP)"),
    "9f1e2d3c4b5a69788796a5b4c3d2e1f0": ("Urology", "Kidney", "Nephrectomy"),
    "MissingVid1": ("Gynecology", "Uterus", "Hysterectomy"),
}


def release_rows() -> dict[str, list[dict]]:
    """Rows of each split, exactly as written to the sample parquet files."""
    rows: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for number, (split, source, slug, start, end, question, answer, wrong, flag, sep) in enumerate(QUESTIONS):
        texts = []
        if wrong:
            texts = [answer, *wrong]
            random.Random(f"sample-{number}").shuffle(texts)
        rows[split].append(
            release_row(
                question_id=f"sureon_{split}_{number:04d}",
                source_id=source,
                category=slug,
                start=start,
                end=end,
                question=question,
                answer=answer,
                option_texts=texts,
                topic=TOPICS[source],
                narration="Now we carefully continue with this part of the procedure.",
                reasoning=REASONING if slug == "temporal_ordering" else "",
                passes_blind_curation=None if split == "test" else flag,
                time_separator=sep,
            )
        )
    return rows


REASONING = "The events are ordered by when each is first seen in the clip."
SCHEMA = RELEASE_SCHEMA


def write_release(out: Path, rows: dict[str, list[dict]] | None = None, schema: pa.Schema | None = SCHEMA) -> Path:
    """Write ``rows`` (default: the sample) as ``out/data/<split>-00000-of-00001.parquet``."""
    return write_release_splits(out, rows if rows is not None else release_rows(), schema)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "sureon_release")
    args = parser.parse_args(argv)
    write_release(args.out)
    print(f"sample release written to {args.out}")


if __name__ == "__main__":
    main()
