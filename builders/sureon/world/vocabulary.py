"""The world's tables: the visual primitives its clips are drawn with, the words that name them, and its question
templates.

Each question's answer is known by construction and drawn into its clip:

- EE: a solid square in one of seven colours -> which instrument is visible (colour -> instrument);
- EA, SPI: a square with one of seven fill patterns -> the state of the structure, the safety practice shown;
- AD, PAD, IAI, LAR: a square moving right / left / up / down, growing, shrinking or still -> the action, in four
  vocabularies (IAI names the instrument by its colour; LAR asks why);
- F: three consecutive phases of a fixed seven-phase cycle, one colour each -> the next phase;
- TO: three distinct phases in a random order -> their order as letters (``B,A,C``); SM: the same, as text.

Apart because every other part of the world reads them, by index: the planner picks an answer's index, the drawing
paints that index's primitive, the rows word it, and ``world.json`` records the tables.
"""

# The categories a world asks (codes of builders/sureon/categories.py): TO and SM have no options.
MCQ_CODES = ("AD", "EE", "EA", "PAD", "IAI", "LAR", "SPI", "F")
ALL_CODES = (*MCQ_CODES, "TO", "SM")

# The seven colours of the world (RGB): instruments and phases are told apart by colour alone.
COLOURS = (
    (220, 40, 40),
    (40, 200, 60),
    (50, 80, 230),
    (235, 215, 40),
    (40, 210, 220),
    (210, 50, 200),
    (240, 240, 240),
)
INSTRUMENTS = (
    "Grasper",
    "Hook electrode",
    "Clip applier",
    "Scissors",
    "Suction irrigator",
    "Stapler",
    "Needle driver",
)
# The procedure's phases in their fixed order (a cycle): forecasting asks for the successor of the last one shown.
PHASES = ("Port placement", "Dissection", "Clipping", "Division", "Irrigation", "Extraction", "Closure")
MOTIONS = ("right", "left", "up", "down", "grow", "shrink", "still")
PATTERNS = ("solid", "hollow", "horizontal stripes", "vertical stripes", "checkers", "top half", "dot")

# Answer vocabularies, index-aligned with the visual primitive that shows them.
VOCABULARY = {
    "EE": INSTRUMENTS,
    "AD": (
        "Retracting to the right",
        "Retracting to the left",
        "Lifting the tissue",
        "Pressing down",
        "Advancing toward the camera",
        "Withdrawing from the camera",
        "Holding position",
    ),
    "PAD": ("Retracting", "Pulling", "Lifting", "Pressing", "Advancing", "Withdrawing", "Holding"),
    "IAI": (
        "Sweeping the tissue laterally",
        "Drawing the tissue medially",
        "Elevating the tissue",
        "Depressing the tissue",
        "Approaching the target",
        "Backing away from the target",
        "Keeping the tissue still",
    ),
    "LAR": (
        "To expose the triangle",
        "To open the window",
        "To lift the fundus",
        "To flatten the field",
        "To inspect closely",
        "To widen the view",
        "To keep tension",
    ),
    "EA": ("Intact", "Opened", "Clipped", "Transected", "Coagulated", "Bleeding", "Stapled"),
    "SPI": (
        "Critical view of safety",
        "Clip check before division",
        "Ureter identified",
        "Bleeding controlled",
        "Instrument count",
        "Leak test",
        "Safe port entry",
    ),
    "F": PHASES,
}
QUESTIONS = {
    "EE": "In this {procedure}, which instrument is visible?",
    "AD": "In this {procedure}, what action is being performed?",
    "PAD": "In this {procedure}, which action best describes this clip?",
    "IAI": "In this {procedure}, what is the {instrument} doing?",
    "LAR": "In this {procedure}, why is the {instrument} moved this way?",
    "EA": "In this {procedure}, what is the state of the structure?",
    "SPI": "In this {procedure}, which safety practice is shown?",
    "F": "In this {procedure}, what is the next step?",
    "TO": "In this {procedure}, order these events as they occur. A: {a} B: {b} C: {c}",
    "SM": "In this {procedure}, summarize the sequence of surgical steps.",
}
# The ``length`` shortcut: the correct option, made longer and more specific than its distractors.
ELABORATION = ", as clearly shown in the magnified view of the operative field"
# The ``narrated`` shortcut (and its decoys): the question worded from the narration.
NARRATION_CUE = "According to the narration, "
# The ``wording`` shortcut: the question names the answer.
NARRATOR_REMARK = " The narrator mentions: {answer}."
# (procedure, specialty, subject): subjects stratify the guessers' folds (builders/sureon/folds.py).
PROCEDURES = (
    ("cholecystectomy", "General Surgery", "Hepatobiliary"),
    ("appendectomy", "General Surgery", "Colon"),
    ("hysterectomy", "Gynecology", "Uterus"),
    ("nephrectomy", "Urology", "Kidney"),
)
