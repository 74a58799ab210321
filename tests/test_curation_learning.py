"""Stage 3 works, not only runs: blind guessers trained by the guesser recipe on held-out folds find the rows of a
synthetic world (builders/sureon/world/) that a planted language shortcut answers, through ``sureon curate
--num-folds``, and few others.

The world: instrument and forecasting questions, seven options in the vocabulary's order, the correct option longer
and more specific than the distractors on 70 % of the training rows (the Sureon paper's Table 8 and Figure 9). Two fold
guessers, each a 128-wide text Qwen3 of the tiny guesser recipe (recipes/tiny/guesser/config_world.yaml), 300 steps.
Measured (recall; share of plain rows removed) with the guessers' seed (and so their folds) 7: 1.00 and 2.9 %; with
seeds 0, 1, 3 and 11: 0.98, 1.00, 0.98 and 1.00 (plain 2.3-5.2 %); with TRL's own numerics (no
cpu_labelled_positions_only), seeds 3 and 7: 1.00 and 1.00. A guesser learns the shortcut after a plateau whose end
varies with float rounding (the recipe's comment gives the measured spread); with the recipe's earlier constant rate
and Adam's default beta2, seed 7 gave 0.99 on one machine and 0.83 on another. A separate file from test_learning.py,
so that the two run on different workers of ``make test``."""

import pytest
from recipe_runs import REPO, build_world, one_thread, train

from builders.sureon import world
from recipes.evaluation.sureon import miniature
from sureon.cli import main as sureon


pytestmark = pytest.mark.timeout(1800)
SHORTCUT_WORLD = {
    "categories": ["EE", "F"],
    "option_order": "vocabulary",
    "options": {"train": 7, "validation": 7, "test": 7},
    "shortcuts": {"train": {"length": 0.7}},
    "videos": {"train": 48, "validation": 1, "test": 1},
    "questions_per_video": {"train": 12, "validation": 2, "test": 2},
}


@pytest.fixture(scope="module")
def shortcut_world(tmp_path_factory):
    """Multiple-choice questions, 70 % of the training rows with the correct option longer than the others; built
    without videos (the guessers are blind)."""
    root = tmp_path_factory.mktemp("shortcut_world")
    build_world(root, SHORTCUT_WORLD, ["train_all"])
    return root


@pytest.mark.cpu_budget(240)  # two guessers of 300 steps and the curation: measured ~90 CPU s on one thread
def test_fold_guessers_find_the_planted_shortcut_through_sureon_curate(shortcut_world):
    from recipes.training.tiny_models import build_tiny_causal_lm

    root = shortcut_world
    model = build_tiny_causal_lm(root / "tiny-lm", corpus=root / "world" / "corpus.txt", hidden_size=128, head_dim=32)
    recipe = REPO / "recipes" / "tiny" / "guesser" / "config_world.yaml"
    mixture = [{"path": str(root / "build"), "name": "train_all", "split": "train"}]
    specs = []
    for fold in range(2):
        # seed 7, not the curation's default 42: curate takes the folds the guessers trained with
        out = train(
            "sft",
            recipe,
            root / f"fold{fold}",
            model_name_or_path=str(model),
            dataset_mixture=mixture,
            fold=fold,
            num_folds=2,
            seed=7,
            cpu_labelled_positions_only=True,  # ~40 % less CPU a step (float rounding differs)
            max_steps=300,
            save_steps=300,
        )
        specs.append(f"--guesser=model={out},name=fold{fold}")
    with one_thread():
        assert (
            sureon(
                [
                    "curate",
                    "--dataset",
                    str(root / "build"),
                    "--config",
                    "train_all",
                    "--split",
                    "train",
                    *specs,
                    "--num-folds",
                    "2",
                    "--out",
                    str(root / "curated"),
                ]
            )
            == 0
        )
    figures = miniature.shortcut_recovery(
        miniature.read_decisions(root / "curated"), world.read_shortcuts(root / "world")
    )
    assert figures["recall"] >= 0.9, figures
    assert figures["plain_removed_rate"] <= 0.1, figures
