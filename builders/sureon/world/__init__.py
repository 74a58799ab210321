"""``sureon world``: a visually grounded synthetic Sureon world, a release in the official layout whose answers lie
in the frames, with planted language shortcuts and decoys, and their ground truth.

Why: every other fixture of the project proves that a stage *runs*. This one lets a test prove that the method
*works*: that a recipe learns what only the frames show, and that stage 3 (blind-test curation) finds the questions a
model can answer without them.

The parts: ``config.py`` (the settings, every key documented on :class:`WorldConfig`), ``vocabulary.py`` (which
primitive shows which answer, and the words), ``planning.py`` (the questions, shortcuts and decoys), ``rows.py`` (the
release rows), ``drawing.py`` and ``videos.py`` (the clips), ``write.py`` (the files), ``truth.py`` (reading the
ground truth back) and ``command.py``.
"""

from builders.sureon.world.config import WorldConfig, load_config  # noqa: F401 (`sureon reproduce`, tests)
from builders.sureon.world.truth import read_shortcuts, row_kinds  # noqa: F401 (`sureon reproduce`, tests)
from builders.sureon.world.write import write_world  # noqa: F401 (`sureon reproduce`, tests, benchmarks)
