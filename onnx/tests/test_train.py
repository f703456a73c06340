"""Training pipeline on the throw-away fake simulator (the real one is exercised by make train-smoke)."""

import csv
import dataclasses
import json

import numpy as np
import pytest
from fake_gym import fake_backend

from mocc.adapt import AdaptConfig, iterations_to_fraction, run_adaptation
from mocc.checkpoint import load_model
from mocc.config import PPOConfig, TrainConfig
from mocc.env import BackendMissing, MoccEnv
from mocc.export import validate as validate_onnx
from mocc.judge import training_seeds
from mocc.policy import ActorMean
from mocc.train import (EXIT_NO_SIMULATOR, EXIT_USAGE, RunError, main, parse_args, run_training, validate,
                        validation_seeds)


def test_reward_is_the_weighted_sum_and_weights_lead_the_observation():
    env = MoccEnv((0.6, 0.3, 0.1), seed=5, episode_steps=20, backend=fake_backend)
    obs, _ = env.reset()
    assert obs.shape == (33,) and np.allclose(obs[:3], [0.6, 0.3, 0.1])
    _, r, term, trunc, info = env.step(np.array([2.0]))
    assert r == pytest.approx(0.6 * info["o_thr"] + 0.3 * info["o_lat"] + 0.1 * info["o_loss"])
    env.set_objective((0.1, 0.8, 0.1))
    obs, _ = env.reset()
    assert np.allclose(obs[:3], [0.1, 0.8, 0.1])
    with pytest.raises(ValueError, match="sum to 1"):
        env.set_objective((0.5, 0.5, 0.5))


def test_entropy_coefficient_decays_linearly_over_the_decay_iterations():
    p = PPOConfig(ent_coef_start=1.0, ent_coef_end=0.1)
    assert [p.ent_coef(i) for i in (0, 500, 1000, 5000)] == pytest.approx([1.0, 0.55, 0.1, 0.1])


def test_default_entropy_coefficient_is_zero_so_log_std_is_not_driven_up():
    p = PPOConfig()
    assert [p.ent_coef(i) for i in (0, 1000)] == [0.0, 0.0]


def tiny(tmp_path, **kw) -> TrainConfig:
    cfg = TrainConfig(out_dir=str(tmp_path / "run"), workers=1, episode_steps=64, bootstrap_iterations=2,
                      iterations_per_objective=1, max_rounds=1, traverse_limit=3, eval_links=1, eval_steps=64)
    cfg.ppo = dataclasses.replace(cfg.ppo, n_steps=64, batch_size=32, n_epochs=1)
    return dataclasses.replace(cfg, **kw)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run stopped by its time budget after one visit, then resumed to the end."""
    tmp = tmp_path_factory.mktemp("train")
    first = run_training(tiny(tmp, time_budget_s=1e-6), backend=fake_backend, show_progress=False)
    second = run_training(tiny(tmp), resume=True, backend=fake_backend, show_progress=False)
    return tmp / "run", first, second


def test_a_stopped_run_resumes_where_it_stopped(trained):
    run, first, second = trained
    assert first["position"] == 1 and first["iteration"] == 1 and not first["done"]
    # 2 bootstrap chunks x 3 objectives + 3 traversal visits, one iteration each, no visit repeated.
    assert second["done"] and second["iteration"] == 9
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["iteration"]) for r in rows] == list(range(1, 10))
    assert [r["phase"] for r in rows] == ["bootstrap"] * 6 + ["traverse"] * 3
    assert json.loads((run / "state.json").read_text())["done"]
    assert len(json.loads((run / "metrics.json").read_text())) == 5  # 3 bootstrap + 2 more landmarks


def test_a_run_directory_is_not_overwritten_and_resume_needs_one(trained, tmp_path):
    run, _, _ = trained
    with pytest.raises(RunError, match="already holds a run"):
        run_training(dataclasses.replace(tiny(run.parent)), backend=fake_backend, show_progress=False)
    with pytest.raises(RunError, match="no run to resume"):
        run_training(tiny(tmp_path), resume=True, backend=fake_backend, show_progress=False)
    assert main(["--out", str(run), "--no-progress"], backend=fake_backend) == EXIT_USAGE


def test_a_new_run_can_start_from_another_runs_weights_on_the_same_latency_base(trained, tmp_path):
    run, _, _ = trained
    source = load_model(run / "model.zip").policy.state_dict()
    cfg = tiny(tmp_path, time_budget_s=1e-6, link="users")
    # Stopped after its first iteration (the budget is spent at once).
    state = run_training(cfg, backend=fake_backend, show_progress=False, init_from=run)
    assert state["iteration"] == 1
    assert json.loads((tmp_path / "run" / "config.json").read_text())["init_from"] == str(run / "model.zip")
    fresh = run_training(tiny(tmp_path / "fresh", time_budget_s=1e-6), backend=fake_backend, show_progress=False)
    assert fresh["iteration"] == 1
    first = load_model(tmp_path / "run" / "model.zip").policy.state_dict()
    other = load_model(tmp_path / "fresh" / "run" / "model.zip").policy.state_dict()
    # One PPO update moves the weights a little: the fine-tuned run stays far closer to its source.
    dist = lambda a, b: sum(float((a[k] - b[k]).abs().sum()) for k in a)  # noqa: E731
    assert dist(first, source) < 0.5 * dist(other, source)
    with pytest.raises(RunError, match="trained with --rtt-base lowest, this run asks for lowest-10s"):
        run_training(tiny(tmp_path / "b", rtt_base="lowest-10s"), backend=fake_backend, show_progress=False,
                     init_from=run)
    with pytest.raises(RunError, match="no checkpoint there"):
        run_training(tiny(tmp_path / "c"), backend=fake_backend, show_progress=False, init_from=tmp_path / "none")
    with pytest.raises(RunError, match="starts a new run"):
        run_training(tiny(tmp_path), resume=True, backend=fake_backend, show_progress=False, init_from=run)
    assert main(["--out", str(tmp_path / "d"), "--init-from", str(tmp_path / "none"), "--no-progress"],
                backend=fake_backend) == EXIT_USAGE


def test_a_run_started_from_another_trains_with_its_own_learning_rate(trained, tmp_path):
    run, _, _ = trained
    assert load_model(run / "model.zip").learning_rate == pytest.approx(TrainConfig().ppo.learning_rate)
    cfg = tiny(tmp_path, time_budget_s=1e-6)
    cfg.ppo = dataclasses.replace(cfg.ppo, learning_rate=2e-5)
    run_training(cfg, backend=fake_backend, show_progress=False, init_from=run)
    tuned = load_model(tmp_path / "run" / "model.zip")
    assert tuned.learning_rate == pytest.approx(2e-5)
    assert [g["lr"] for g in tuned.policy.optimizer.param_groups] == pytest.approx([2e-5])
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["ppo"]["learning_rate"] == 2e-5
    cfg, _ = parse_args(["--out", "x", "--link", "users", "--learning-rate", "5e-5"])
    assert cfg.ppo.learning_rate == 5e-5
    assert parse_args(["--out", "x", "--link", "users"])[0].ppo.learning_rate == 3e-4
    for bad in ("0", "-1e-4", "1"):
        with pytest.raises(SystemExit) as e:
            parse_args(["--out", "x", "--learning-rate", bad])
        assert e.value.code == 2


def test_missing_simulator_extension_is_a_distinct_exit_status(tmp_path):
    def missing(*_):
        raise BackendMissing("the polycc_gym extension is not installed: build it with `make gym`")

    assert main(["--out", str(tmp_path / "r"), "--workers", "1", "--no-progress"], backend=missing) == EXIT_NO_SIMULATOR


def test_validation_keeps_the_best_model_not_the_last(tmp_path):
    # Before: a run kept only its last model, though on the users links validation peaked mid-run and fell.
    cfg = tiny(tmp_path, validate_every=2, validation_links=2)
    state = run_training(cfg, backend=fake_backend, show_progress=False, command="python -m mocc.train --test")
    run = tmp_path / "run"
    rows = list(csv.DictReader((run / "validation.csv").open()))
    # 9 one-iteration visits: every 2 iterations, and once more for the model the run ends with.
    assert [int(r["iteration"]) for r in rows] == [2, 4, 6, 8, 9]
    scores = [float(r["reward"]) for r in rows]
    assert [r["best"] == "True" for r in rows] == [i == 0 or x > max(scores[:i]) for i, x in enumerate(scores)]
    best = scores.index(max(scores))
    assert state["validation"]["best_iteration"] == int(rows[best]["iteration"])
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == sorted(f"it{r['iteration']}.zip" for r in rows)
    model = load_model(run / "best.zip")
    again = validate(ActorMean(model.policy), cfg, fake_backend)
    assert again["reward"] == pytest.approx(scores[best], abs=1e-12)
    snap = load_model(run / "snapshots" / f"it{rows[best]['iteration']}.zip")
    for a, b in zip(model.policy.state_dict().values(), snap.policy.state_dict().values()):
        assert np.array_equal(a.numpy(), b.numpy())
    meta = validate_onnx(run / "best.onnx", run / "best.golden.json")
    assert meta["polycc.train_command"] == "python -m mocc.train --test" and meta["polycc.seed"] == "1"


def test_validation_links_are_held_out_from_training_and_refused_by_the_judge():
    cfg, _ = parse_args(["--link", "users", "--seed", "3", "--workers", "15", "--validate-every", "30",
                         "--validation-links", "100"])
    seeds = set(validation_seeds(cfg))
    trained = {3000 + i for i in range(cfg.workers)} | {3500 + i for i in range(cfg.eval_links)}
    assert len(seeds) == 100 and not seeds & trained
    assert seeds <= set(training_seeds(3))  # mocc.judge will not judge this model on its validation links
    with pytest.raises(SystemExit):
        parse_args(["--validation-links", "101"])


def test_iterations_to_99_percent_of_the_maximum_gain():
    assert iterations_to_fraction([1.0, 1.5, 1.9, 1.995, 2.0, 1.98]) == (3, pytest.approx(1.0))
    assert iterations_to_fraction([1.0, 0.9, 0.8]) == (0, 0.0)


def test_adaptation_reports_gain_and_old_objectives(trained, tmp_path):
    run, _, _ = trained
    r = run_adaptation(AdaptConfig(model=str(run / "model.zip"), weights=(0.65, 0.25, 0.1), iterations=2,
                                   pool_size=2, eval_links=1, out_dir=str(tmp_path)), backend=fake_backend,
                       show_progress=False)
    assert 0 <= r["iterations_to_99pct_gain"] <= 2
    assert len(r["old_objectives_reward_change"]) == 2
    assert (tmp_path / "adapt.png").stat().st_size > 1000
    rows = list(csv.DictReader((tmp_path / "adapt.csv").open()))
    assert [int(x["iteration"]) for x in rows] == [0, 1, 2] and all(x["replayed"] for x in rows[1:])


def test_model_card_is_written_from_the_run(trained):
    from pathlib import Path

    from mocc.card import render

    run, _, _ = trained
    onnx_dir = Path(__file__).resolve().parents[1]
    card = render(run, None, None, onnx_dir / "mocc.onnx")
    assert "| PPO iterations | 9 (schedule finished) |" in card
    assert "| seed |" in card and "<0.6,0.3,0.1>" in card
    oracle = run / "oracle"  # a mocc.oracle report (no plot, so nothing is copied next to the shipped model)
    oracle.mkdir(exist_ok=True)
    (oracle / "oracle.md").write_text("| queue range | links per set |\n|---|---|\n| aurora | 10 |\n")
    card = render(run, None, None, onnx_dir / "mocc.onnx", oracle_dir=oracle)
    assert "## Eq. 2's own optimum and this model on two queue ranges" in card and "| aurora | 10 |" in card
    # A judge report (the links users have) takes the envelope evaluation's place.
    ev, judge = run / "eval", run / "judge"
    for d, text in ((ev, "| in-envelope links |\n"), (judge, "| throughput landmark <0.8,0.1,0.1> |\n")):
        d.mkdir(exist_ok=True)
        (d / ("eval.md" if d == ev else "judge.md")).write_text(text)
    card = render(run, ev, None, onnx_dir / "mocc.onnx")
    assert "in-envelope links" in card and "links users have" not in card
    card = render(run, ev, None, onnx_dir / "mocc.onnx", judge_dir=judge)
    assert "## Evaluation on the links users have" in card and "| throughput landmark" in card
    assert "in-envelope links" not in card


def test_the_validation_curve_is_plotted_from_the_runs_csv(tmp_path):
    from mocc.card import plot_validation

    csv_path = tmp_path / "validation.csv"
    csv_path.write_text("iteration,timesteps,elapsed_s,reward,thr_utilization,lat_utilization\n"
                        "30,180000,43.9,0.909,0.993,0.336\n60,360000,83.4,0.923,0.980,0.531\n")
    assert plot_validation(csv_path, tmp_path / "v.png") and (tmp_path / "v.png").stat().st_size > 5000
    csv_path.write_text("iteration,timesteps,elapsed_s,reward,thr_utilization,lat_utilization\n")
    assert not plot_validation(csv_path, tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_the_latency_base_is_a_training_setting_that_a_bad_value_refuses():
    from mocc.train import parse_args

    cfg, _ = parse_args(["--out", "/tmp/x", "--rtt-base", "lowest-10s"])
    assert cfg.rtt_base == "lowest-10s"
    assert parse_args(["--out", "/tmp/x"])[0].rtt_base == "lowest"
    with pytest.raises(SystemExit):
        parse_args(["--out", "/tmp/x", "--rtt-base", "recent"])


def test_a_cards_evaluation_is_refreshed_from_a_judge_report_and_nothing_else_moves(tmp_path, capsys):
    from mocc.card import main

    card = tmp_path / "card.md"
    head = "# MOCC model card\n\ntrained long ago\n\n## Training\n\n| a | b |\n"
    tail = "## Online adaptation (requirement replay)\n\n| measure | value |\n"
    card.write_text(head + "\n## Evaluation (simulator)\n\n| in-envelope links | 0.98 |\n\n" + tail)
    judge = tmp_path / "judge"
    assert main(["--refresh-evaluation", "--judge", str(judge), "--out", str(card)]) == 2
    assert "holds no mocc.judge report" in capsys.readouterr().err
    judge.mkdir()
    (judge / "judge.md").write_text("| throughput landmark <0.8,0.1,0.1> | yes |\n")
    assert main(["--refresh-evaluation", "--judge", str(judge), "--out", str(card)]) == 0
    text = card.read_text()
    assert text.startswith(head) and text.endswith(tail), text
    assert "## Evaluation on the links users have" in text and "| throughput landmark" in text
    assert "in-envelope links" not in text
    # Refreshing twice gives the same card; a card without an evaluation section, or another report, is refused.
    assert main(["--refresh-evaluation", "--judge", str(judge), "--out", str(card)]) == 0
    assert card.read_text() == text
    card.write_text(head)
    assert main(["--refresh-evaluation", "--judge", str(judge), "--out", str(card)]) == 2
    assert "no '## Evaluation' section" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["--refresh-evaluation", "--run", "onnx/runs/x", "--out", str(card)])
    assert e.value.code == 2
