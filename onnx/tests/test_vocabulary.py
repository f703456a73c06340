"""docs/metrics.md: every number MOCC's pipeline writes (a training run's config, metrics and state,
eval.json, oracle.json) is named after its unit or listed by name; checked with the same checker as
the simulator's and the runner's outputs (experiments/tests/vocabulary.py), on the fake gym."""
import dataclasses
import json
import sys
from pathlib import Path

ONNX_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ONNX_DIR.parent / "experiments" / "tests"))
from vocabulary import violations  # noqa: E402


def names_in(path: Path) -> list[str]:
    return violations(json.loads(path.read_text()))


def test_a_training_run_names_its_units(tmp_path):
    from fake_gym import fake_backend
    from mocc.train import TrainConfig, run_training

    cfg = TrainConfig(out_dir=str(tmp_path / "run"), workers=1, episode_steps=64, bootstrap_iterations=1,
                      iterations_per_objective=1, max_rounds=1, traverse_limit=1, eval_links=1, eval_steps=32,
                      validate_every=1, validation_links=1)
    cfg.ppo = dataclasses.replace(cfg.ppo, n_steps=64, batch_size=32, n_epochs=1)
    run_training(cfg, backend=fake_backend, show_progress=False)
    written = {p.name: names_in(p) for p in sorted((tmp_path / "run").glob("*.json"))}
    assert set(written) >= {"config.json", "metrics.json", "state.json"}, written
    assert written == {name: [] for name in written}
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert all("loss_frac" in row and "loss" not in row for row in metrics.values()), metrics


def test_eval_and_oracle_name_their_units(tmp_path):
    from fake_gym import fake_backend
    from mocc.evaluate import main as evaluate_main
    from mocc.oracle import main as oracle_main

    evaluate_main(["--model", str(ONNX_DIR / "mocc.onnx"), "--links", "2", "--objectives", "5", "--steps", "20",
                   "--out", str(tmp_path / "eval")], backend=fake_backend)
    oracle_main(["--links", "2", "--seeds", "1", "--steps", "20", "--out", str(tmp_path / "oracle"), "--no-progress"],
                backend=fake_backend)
    assert names_in(tmp_path / "eval" / "eval.json") == []
    assert names_in(tmp_path / "oracle" / "oracle.json") == []


def test_the_check_fails_on_the_old_loss_name():
    assert [v.split(":")[0] for v in violations({"landmarks": [{"loss": 0.01, "loss_frac": 0.01}]})] == [
        ".landmarks[].loss"]
