"""Write the small synthetic SurgiQ file shipped in ``sample_data/surgiq/`` (and a MedQA-style external file).

Shaped like the proposed SurgiQ schema [``docs/release_format.md``]: JSON Lines with ``id``, ``question``,
``options`` (a list of four), ``answer`` (a letter), ``explanation``, ``domain`` (the six domains, spelled as a
release might: "General Surgery", ...), ``question_type`` (case-based / reasoning / best-option / negative),
``source_type`` and a ``source_ref`` the builder carries through. Correct positions are balanced over A-D in a seeded
order. ``external_sample.jsonl`` holds MedQA-style questions (``question``, ``options`` as ``{letter: text}``,
``answer_idx``) of which two copy a SurgiQ question nearly verbatim (planted near-duplicates) and one shares only a
generic "All of the following ... EXCEPT" stem. As in many written MCQs, the correct option is often the longest and
most specific one here, which the shortcut baselines (``sureon shortcuts surgiq``) expose.

    python sample_data/make_surgiq_sample.py --out sample_data/surgiq
"""

import argparse
import json
import random
from pathlib import Path


LETTERS = "ABCD"

# fmt: off
# (domain, question_type, source_type, question, correct answer, distractors, explanation)
QUESTIONS = [
    ("General Surgery", "case-based", "textbook",
     ("A 45-year-old woman has right upper quadrant pain after fatty meals, fever of 38.6 C and a positive Murphy "
     "sign. Ultrasound shows gallstones with a thickened gallbladder wall. What is the most appropriate management?"),
     "Early laparoscopic cholecystectomy within 72 hours",
     ["Elective cholecystectomy after six weeks", "Oral ursodeoxycholic acid",
      "Extracorporeal shock wave lithotripsy"],
     "Early cholecystectomy for acute cholecystitis shortens stay without raising complications."),
    ("General Surgery", "reasoning", "textbook",
     "Why is the critical view of safety established before clipping during laparoscopic cholecystectomy?",
     "To identify the cystic duct and artery with certainty and avoid bile duct injury",
     ["To shorten the operating time", "To reduce port-site infection", "To allow intraoperative cholangiography"],
     "Misidentification of the common bile duct is the main mechanism of major bile duct injury."),
    ("General Surgery", "best-option", "exam",
     "Which is the best initial imaging study for a patient with suspected acute appendicitis in a young woman?",
     "Graded-compression ultrasound", ["Plain abdominal radiograph", "Barium enema", "Diagnostic laparoscopy"],
     "Ultrasound avoids radiation and is the first test in young women; CT follows if it is inconclusive."),
    ("General Surgery", "negative", "textbook",
     "All of the following are risk factors for incisional hernia EXCEPT:",
     "Transverse skin crease incision", ["Wound infection", "Obesity", "Smoking"],
     "Midline incisions and wound infection raise the risk; transverse incisions carry the lowest risk."),
    ("General Surgery", "case-based", "research_paper",
     ("A 70-year-old man has colicky abdominal pain, distension and absolute constipation. Radiographs show a "
     "coffee-bean sign arising from the left iliac fossa. He has no peritonitis. What is the first step?"),
     "Endoscopic decompression of the sigmoid volvulus", ["Immediate Hartmann procedure", "Barium enema",
                                                          "Total colectomy"],
     "Without peritonitis, endoscopic detorsion comes first, followed by elective resection."),
    ("Neurosurgery", "case-based", "textbook",
     ("A 30-year-old man is lucid after a blow to the temple, then becomes drowsy with a dilated right pupil. CT "
     "shows a biconvex hyperdense collection. What is the most appropriate treatment?"),
     "Emergency craniotomy and evacuation of the extradural haematoma",
     ["Observation with repeat CT in 24 hours", "Burr hole drainage of a chronic subdural",
      "Intravenous dexamethasone"],
     "A lucid interval and a lens-shaped clot indicate an extradural haematoma needing urgent evacuation."),
    ("Neurosurgery", "reasoning", "textbook",
     "Why does a raised intracranial pressure produce a third nerve palsy before other cranial nerve signs?",
     "The uncus herniates over the tentorial edge and compresses the oculomotor nerve",
     ["The abducens nerve has the longest intracranial course", "The optic nerve sheath transmits pressure first",
      "The facial nerve is compressed in the internal auditory canal"],
     "Transtentorial herniation compresses the third nerve, whose parasympathetic fibres dilate the pupil first."),
    ("Neurosurgery", "best-option", "research_paper",
     ("Which treatment is preferred for a ruptured posterior communicating artery aneurysm in a good-grade patient "
     "when both options are feasible?"),
     "Endovascular coiling", ["Conservative management", "Proximal carotid ligation", "Wrapping of the aneurysm"],
     "Coiling improves independent survival compared with clipping when both are suitable."),
    ("Neurosurgery", "negative", "exam",
     "Which of the following is NOT a feature of cauda equina syndrome?",
     "Brisk knee reflexes", ["Saddle anaesthesia", "Urinary retention", "Bilateral sciatica"],
     "Cauda equina lesions are lower motor neuron lesions; reflexes are reduced, not brisk."),
    ("Neurosurgery", "case-based", "textbook",
     ("A 60-year-old man on warfarin has a two-week history of headache and confusion after a minor fall. CT shows a "
     "crescentic hypodense collection over the left hemisphere. What is the most appropriate operation?"),
     "Burr hole drainage of the chronic subdural haematoma",
     ["Decompressive craniectomy", "Ventriculoperitoneal shunt", "Stereotactic biopsy"],
     "Chronic subdural haematomas are liquid and drain through burr holes after reversing anticoagulation."),
    ("Robotic Surgery", "reasoning", "textbook",
     "Why is the remote centre of motion placed at the abdominal wall when docking a robotic arm?",
     "To pivot instruments about the port and limit torque on the abdominal wall",
     ["To increase the camera field of view", "To reduce the insufflation pressure", "To allow haptic feedback"],
     "Pivoting at the incision avoids tearing the port site during instrument movement."),
    ("Robotic Surgery", "best-option", "textbook",
     "Which is the best way to manage loss of haptic feedback during robotic suturing?",
     "Rely on visual cues of tissue and suture deformation",
     ["Increase the grip force setting", "Switch to monopolar instruments", "Use larger needles"],
     "Surgeons compensate for absent haptics with visual feedback of tissue and thread tension."),
    ("Robotic Surgery", "negative", "research_paper",
     "All of the following are advantages of robotic over conventional laparoscopic surgery EXCEPT:",
     "Lower equipment cost", ["Wristed instruments", "Tremor filtration", "Three-dimensional vision"],
     "Robotic platforms cost more; their advantages are dexterity and visualisation."),
    ("Robotic Surgery", "case-based", "research_paper",
     ("During robotic prostatectomy the anaesthetist reports rising airway pressure and falling saturation in steep "
     "Trendelenburg position. What should the console surgeon do first?"),
     "Reduce insufflation pressure and the Trendelenburg angle",
     ["Continue and convert at the end", "Increase the tidal volume", "Give a bolus of intravenous fluid"],
     "Pneumoperitoneum and steep head-down tilt impair ventilation; relieving both comes first."),
    ("Robotic Surgery", "reasoning", "exam",
     "Why must instruments be removed under vision before undocking the robot in an emergency?",
     "Blind removal can injure bowel or vessels held by the wristed instruments",
     ["Undocking resets the system clock", "The camera must be recalibrated", "The arms lose power when undocked"],
     "Straightening the wrists and withdrawing under vision avoids inadvertent injury."),
    ("Orthopedic Surgery", "case-based", "textbook",
     ("A 78-year-old woman has a displaced intracapsular femoral neck fracture after a fall. She was independent and "
     "active. What is the most appropriate operation?"),
     "Total hip arthroplasty", ["Dynamic hip screw", "Skin traction for six weeks", "Intramedullary nail"],
     "Displaced intracapsular fractures in active older patients are best treated by arthroplasty."),
    ("Orthopedic Surgery", "reasoning", "textbook",
     "Why are displaced intracapsular femoral neck fractures at high risk of avascular necrosis?",
     "The retinacular vessels from the medial circumflex femoral artery are torn",
     ["The obturator nerve is compressed", "The fracture heals too rapidly", "Synovial fluid dilutes the haematoma"],
     "The femoral head depends on retinacular branches that run along the neck and are disrupted."),
    ("Orthopedic Surgery", "best-option", "research_paper",
     "Which is the best management of an open tibial fracture on arrival in the emergency department?",
     "Intravenous antibiotics within one hour and a sterile dressing",
     ["Primary wound closure in the department", "Delay antibiotics until debridement", "Immediate bone grafting"],
     "Early antibiotics reduce deep infection; debridement follows in theatre."),
    ("Orthopedic Surgery", "negative", "textbook",
     "Which of the following is NOT an early sign of compartment syndrome of the leg?",
     "Absent dorsalis pedis pulse", ["Pain out of proportion to the injury", "Pain on passive stretch",
                                     "Tense swollen compartment"],
     "Pulses are usually preserved until late; loss of pulse is not an early sign."),
    ("Orthopedic Surgery", "best-option", "exam",
     "Which is the best initial treatment of a minimally displaced distal radius fracture in an elderly patient?",
     "Closed management in a cast", ["Open reduction and internal fixation", "External fixation",
                                     "Wrist arthrodesis"],
     "Minimally displaced fractures in low-demand patients do well in a cast."),
    ("Critical Care", "case-based", "textbook",
     ("A 65-year-old man is hypotensive 6 hours after an emergency laparotomy, with a lactate of 5 mmol/L despite "
     "2 litres of crystalloid. What should be started next?"),
     "Noradrenaline infusion to a mean arterial pressure of 65 mmHg",
     ["A further 5 litres of crystalloid", "Oral fluid challenge", "Dopamine at renal dose"],
     "Persistent hypotension after fluid resuscitation calls for a vasopressor, noradrenaline first."),
    ("Critical Care", "reasoning", "research_paper",
     "Why is a restrictive transfusion threshold of 70 g/L used in most critically ill surgical patients?",
     "Liberal transfusion does not improve survival and adds transfusion-related harm",
     ["Stored blood has a higher oxygen content", "Anaemia prevents ventilator weaning in all patients",
      "Transfused cells last longer than native cells"],
     "Trials show restrictive strategies are at least as safe as liberal ones."),
    ("Critical Care", "negative", "exam",
     "All of the following are components of the abdominal compartment syndrome EXCEPT:",
     "Increased urine output", ["Raised peak airway pressure", "Intra-abdominal pressure above 20 mmHg",
                                "New organ dysfunction"],
     "Raised intra-abdominal pressure causes oliguria, not polyuria."),
    ("Critical Care", "best-option", "textbook",
     "Which is the best method to confirm the position of an endotracheal tube after emergency intubation?",
     "Continuous waveform capnography", ["Auscultation of the chest alone", "Chest radiograph only",
                                         "Observation of chest rise"],
     "Sustained exhaled carbon dioxide on waveform capnography is the most reliable confirmation."),
    ("Critical Care", "case-based", "research_paper",
     ("A ventilated trauma patient develops bilateral infiltrates and a PaO2/FiO2 ratio of 90 mmHg despite high "
     "PEEP. What intervention improves survival?"),
     "Prone positioning for at least 16 hours a day",
     ["High tidal volume ventilation", "Routine high-frequency oscillation", "Early tracheostomy"],
     "Prone positioning reduces mortality in severe acute respiratory distress syndrome."),
    ("Laparoscopic Surgery", "reasoning", "textbook",
     "Why is the open Hasson technique preferred for the first port in a patient with previous midline laparotomy?",
     "It avoids blind entry into adherent bowel under the scar",
     ["It allows higher insufflation pressures", "It shortens the operation", "It removes the need for a camera"],
     "Adhesions under a scar make blind Veress entry more likely to injure bowel."),
    ("Laparoscopic Surgery", "negative", "textbook",
     "All of the following are physiological effects of carbon dioxide pneumoperitoneum EXCEPT:",
     "Increased venous return from the legs", ["Hypercarbia", "Raised systemic vascular resistance",
                                               "Reduced functional residual capacity"],
     "Raised abdominal pressure reduces venous return from the lower limbs."),
    ("Laparoscopic Surgery", "case-based", "exam",
     ("On the first day after laparoscopic appendicectomy a patient has shoulder tip pain and no other symptoms. "
     "Observations are normal. What is the most likely cause?"),
     "Diaphragmatic irritation from residual carbon dioxide",
     ["Subphrenic abscess", "Myocardial infarction", "Port-site hernia"],
     "Residual gas irritates the diaphragm and refers pain to the shoulder; it settles in a few days."),
    ("Laparoscopic Surgery", "best-option", "research_paper",
     "Which is the best repair for a symptomatic bilateral inguinal hernia in a fit adult?",
     "Laparoscopic totally extraperitoneal mesh repair",
     ["Open suture repair of both sides", "Watchful waiting", "Open Lichtenstein repair of one side only"],
     "A laparoscopic repair treats both sides through the same ports with less chronic pain."),
    ("Laparoscopic Surgery", "reasoning", "research_paper",
     "Why does monopolar diathermy carry a risk of capacitive coupling during laparoscopy?",
     "Current can induce a charge in a nearby metal cannula through intact insulation",
     ["The return electrode is inside the abdomen", "Carbon dioxide conducts electricity",
      "The camera light source heats the instrument"],
     "A metal cannula with a plastic anchor can store and discharge current into bowel."),
]

# MedQA-style external questions: (question, {letter: text}, answer letter). The first two copy SurgiQ questions 3
# and 16 with small edits (planted near-duplicates); the third shares only a generic EXCEPT stem with question 4.
EXTERNAL = [
    ("Which is the best initial imaging study for a patient with suspected acute appendicitis in a young woman?",
     {"A": "Ultrasound", "B": "CT", "C": "MRI", "D": "Laparoscopy"}, "A"),
    (("A 78 year old woman has a displaced intracapsular femoral neck fracture after a fall. She was independent and "
     "active. What is the most appropriate operation?"),
     {"A": "Hemiarthroplasty", "B": "Total hip arthroplasty", "C": "Screws", "D": "Traction"}, "B"),
    ("All of the following are causes of hypercalcaemia EXCEPT:",
     {"A": "Primary hyperparathyroidism", "B": "Sarcoidosis", "C": "Hypoparathyroidism", "D": "Myeloma"}, "C"),
    ("A 23-year-old woman presents with fever and dysuria for two days. Which organism is the most likely cause?",
     {"A": "Escherichia coli", "B": "Proteus", "C": "Klebsiella", "D": "Enterococcus"}, "A"),
    ("Which enzyme is deficient in classic phenylketonuria?",
     {"A": "Phenylalanine hydroxylase", "B": "Tyrosinase", "C": "Homogentisate oxidase", "D": "Transaminase"}, "A"),
    ("A child has a barking cough and inspiratory stridor. What is the most likely diagnosis?",
     {"A": "Croup", "B": "Epiglottitis", "C": "Asthma", "D": "Bronchiolitis"}, "A"),
]
# fmt: on

SOURCE_REFS = {"textbook": "sample textbook, chapter {n}", "research_paper": "sample paper {n}", "exam": "sample exam"}


def surgiq_rows() -> list[dict]:
    """The sample questions as written to ``surgiq_sample.jsonl``; correct positions are balanced, order seeded."""
    positions = [i % len(LETTERS) for i in range(len(QUESTIONS))]
    random.Random("surgiq-sample").shuffle(positions)
    rows = []
    for number, (domain, qtype, source, question, answer, wrong, explanation) in enumerate(QUESTIONS):
        qid = f"surgiq_{number:04d}"
        options = list(wrong)
        options.insert(positions[number], answer)
        rows.append(
            {
                "id": qid,
                "question": question,
                "options": options,
                "answer": LETTERS[options.index(answer)],
                "explanation": explanation,
                "domain": domain,
                "question_type": qtype,
                "source_type": source,
                "source_ref": SOURCE_REFS[source].format(n=number % 7 + 1),
            }
        )
    return rows


def external_rows() -> list[dict]:
    return [
        {"id": f"medqa_like_{i:03d}", "question": q, "options": opts, "answer_idx": ans}
        for i, (q, opts, ans) in enumerate(EXTERNAL)
    ]


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "surgiq")
    args = parser.parse_args(argv)
    write_jsonl(surgiq_rows(), args.out / "surgiq_sample.jsonl")
    write_jsonl(external_rows(), args.out / "external_sample.jsonl")
    print(f"sample SurgiQ files written to {args.out}")


if __name__ == "__main__":
    main()
