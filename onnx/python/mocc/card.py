"""Write onnx/MODEL_CARD.md from a training run, an evaluation and an adaptation (no numbers typed by hand).

    PYTHONPATH=onnx/python python3 -m mocc.card --run onnx/runs/train --judge onnx/runs/judge \
        --adapt onnx/runs/adapt --model onnx/mocc.onnx --out onnx/MODEL_CARD.md

With ``--judge`` (a ``mocc.judge`` report: issue 18's targets on the links users have, the oracle as the
yardstick) the card shows that evaluation; ``--eval`` (``mocc.evaluate``'s training-envelope cases) is for
models trained on the envelope and is left out when a judge report is given.

A model whose training run is no longer at hand (its card already written) gets its evaluation refreshed with
``--refresh-evaluation``: the card's evaluation section (the first ``## Evaluation`` heading up to the next ``## ``)
is replaced by the ``--judge`` report, the rest of the card is kept as written.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import sys
from pathlib import Path

from .config import REWARD_SCALE, REWARD_SHIFT
from .export import validate


def plot_validation(csv_path: Path, png: Path) -> bool:
    """The held-out mean reward and the throughput and latency landmarks' utilization against environment
    steps; False (no figure) without rows or matplotlib."""
    rows = list(csv.DictReader(csv_path.open()))
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return False
    if not rows:
        return False
    steps = [int(r["timesteps"]) / 1e6 for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    a.plot(steps, [float(r["reward"]) for r in rows], marker="o")
    a.set(xlabel="environment steps (M)", ylabel="mean eq. 2 reward", title="held-out reward")
    b.plot(steps, [float(r["thr_utilization"]) for r in rows], marker="o", label="throughput landmark")
    b.plot(steps, [float(r["lat_utilization"]) for r in rows], marker="s", label="latency landmark")
    b.set(xlabel="environment steps (M)", ylabel="utilization", title="landmarks on the held-out links", ylim=(0, 1.05))
    b.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def render(run: Path, eval_dir: Path | None, adapt_dir: Path | None, model: Path, notes: str = "",
           oracle_dir: Path | None = None, judge_dir: Path | None = None) -> str:
    cfg = json.loads((run / "config.json").read_text())
    state = json.loads((run / "state.json").read_text())
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    meta = validate(model, model.with_suffix(".golden.json"))
    c = cfg["config"]
    out = ["# MOCC model card (`onnx/mocc.onnx`)", ""]
    if notes:
        out += [notes, ""]
    out += [
        "| | |", "|---|---|",
        f"| command | `{cfg['command']}` |",
        f"| seed | {meta['polycc.seed']} |",
        f"| PPO iterations | {state['iteration']} ({'schedule finished' if state['done'] else 'stopped by the time budget, phase ' + state['phase'] + ', round ' + str(state['round'])}) |",
        f"| environment steps | {rows[-1]['timesteps'] if rows else 0} |",
        f"| wall time | {state['elapsed_s'] / 60:.1f} min, {c['workers']} simulator workers ({platform.machine()}) |",
        f"| objectives converged | {len(state['converged'])} / 36 |",
        f"| link range | {c['link']}, {c['episode_steps']} monitor intervals per episode |",
        f"| file | {model.stat().st_size} bytes, opset 17, format {meta['polycc.format']} |",
        "",
        "Hyperparameters: " + ", ".join(f"{k} {v}" for k, v in c["ppo"].items()) + ". "
        f"PPO is fed {REWARD_SCALE:g} (r - {REWARD_SHIFT:g}) of eq. 2's reward r (config.REWARD_SHIFT; every reward "
        "in this card is the raw r).",
        "",
        "## Training: evaluation reward on the bootstrap objectives (fixed links, deterministic action)",
        "", "| objective | before training | last visit |", "|---|---|---|",
    ]
    for key, ini in state["initial"].items():
        last = [r for r in rows if f"{float(r['w_thr']):.1f},{float(r['w_lat']):.1f},{float(r['w_loss']):.1f}" == key]
        out.append(f"| <{key}> | {ini['reward']:.4f} | {float(last[-1]['reward']):.4f} |" if last else f"| <{key}> | {ini['reward']:.4f} | - |")
    out += ["", f"Per-visit metrics: `{model.parent / 'MODEL_CARD_metrics.csv'}` (a copy of the run's `metrics.csv`).", ""]
    if (run / "validation.csv").exists() and plot_validation(run / "validation.csv", model.parent / "MODEL_CARD_validation.png"):
        out += ["Held-out validation during training (`validation.csv`: the deterministic actor on the run's "
                "validation links, every `--validate-every` iterations):", "",
                "![held-out reward and landmark utilization per validation](MODEL_CARD_validation.png)", ""]
    if judge_dir and (judge_dir / "judge.md").exists():
        out += judge_section(judge_dir)
    elif eval_dir and (eval_dir / "eval.md").exists():
        out += ["## Evaluation (simulator, this file run by onnxruntime)", "", (eval_dir / "eval.md").read_text()]
        if (eval_dir / "landmarks.png").exists():
            shutil.copyfile(eval_dir / "landmarks.png", model.parent / "MODEL_CARD_landmarks.png")
            out += ["![landmarks and median rewards](MODEL_CARD_landmarks.png)", ""]
    if oracle_dir and (oracle_dir / "oracle.md").exists():
        out += ["## Eq. 2's own optimum and this model on two queue ranges (`mocc.oracle`)", "",
                "The best constant rate per link and landmark (an oracle that knows the capacity), on link sets like "
                "the evaluation's with the MOCC reproduction's queues (1 + e^U(0,4) packets, this model's training range) "
                "and Aurora's (1 + e^U(0,8)): how far eq. 2 itself orders the landmarks' RTTs by w_lat; where the "
                "report was run with --model, this file beside it on the same links.", "",
                (oracle_dir / "oracle.md").read_text()]
        if (oracle_dir / "oracle.png").exists():
            shutil.copyfile(oracle_dir / "oracle.png", model.parent / "MODEL_CARD_oracle.png")
            out += ["![oracle latency Spearman per link set](MODEL_CARD_oracle.png)", ""]
    if adapt_dir and (adapt_dir / "adapt.json").exists():
        a = json.loads((adapt_dir / "adapt.json").read_text())
        out += ["## Online adaptation (requirement replay)", "",
                f"Command: `PYTHONPATH=onnx/python python3 -m mocc.adapt --model {a['config']['model']} --weights "
                f"{','.join(map(str, a['config']['weights']))} --iterations {a['config']['iterations']}`", "",
                "| measure | value | target |", "|---|---|---|",
                f"| reward on the new objective | {a['reward_before']:.4f} -> {a['reward_after']:.4f} | |",
                f"| iterations to 99 % of the max gain | {a['iterations_to_99pct_gain']} | <= 50 |",
                f"| worst old-objective reward change | {100 * a['worst_old_change']:+.2f} % | >= -5 % |",
                f"| mean old-objective reward change | {100 * a['mean_old_change']:+.2f} % | |",
                f"| wall time | {a['wall_s']} s | |", ""]
        if (adapt_dir / "adapt.png").exists():
            shutil.copyfile(adapt_dir / "adapt.png", model.parent / "MODEL_CARD_adapt.png")
            out += ["![adaptation](MODEL_CARD_adapt.png)", ""]
    return "\n".join(out) + "\n"


def judge_section(judge_dir: Path) -> list[str]:
    """The card's evaluation section from a ``mocc.judge`` report."""
    return ["## Evaluation on the links users have (`mocc.judge`, simulator, this file run by onnxruntime)", "",
            "Issue 18's targets: eq. 2's reward between the worst classic CCA on each link (0) and the best "
            "constant rate knowing the link (1, the oracle), on links of polycc_gym's users range drawn with "
            "seeds no training run reaches.", "", (judge_dir / "judge.md").read_text()]


class CardError(ValueError):
    """A card or report that --refresh-evaluation cannot work with."""


def refresh_evaluation(card: str, judge_dir: Path) -> str:
    """``card`` with its evaluation section replaced by the judge report's, everything else as it was."""
    if not (judge_dir / "judge.md").exists():
        raise CardError(f"{judge_dir} holds no mocc.judge report (judge.md): run mocc.judge --out {judge_dir} first")
    start = card.find("\n## Evaluation")
    if start < 0:
        raise CardError("the card has no '## Evaluation' section to replace")
    end = card.find("\n## ", start + 1)
    rest = card[end:] if end >= 0 else "\n"
    return card[:start + 1] + "\n".join(judge_section(judge_dir)).rstrip("\n") + "\n" + rest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default="onnx/runs/train")
    ap.add_argument("--eval", default="onnx/runs/eval")
    ap.add_argument("--adapt", default="onnx/runs/adapt")
    ap.add_argument("--model", default="onnx/mocc.onnx")
    ap.add_argument("--oracle", default="onnx/runs/oracle", help="a mocc.oracle report to include, if present")
    ap.add_argument("--judge", default="onnx/runs/judge",
                    help="a mocc.judge report to include, if present (in place of --eval's envelope cases)")
    ap.add_argument("--notes", default="", help="a paragraph placed under the title")
    ap.add_argument("--out", default="onnx/MODEL_CARD.md")
    ap.add_argument("--refresh-evaluation", action="store_true",
                    help="keep the card in --out and replace only its evaluation section with the --judge report "
                         "(a shipped model whose training run is not at hand); takes no other report")
    a = ap.parse_args(argv)
    if a.refresh_evaluation:
        given = [f for f in ("run", "eval", "adapt", "oracle", "notes") if getattr(a, f) != ap.get_default(f)]
        if given:
            ap.error(f"--refresh-evaluation uses only --judge and --out, not --{given[0]}")
        try:
            Path(a.out).write_text(refresh_evaluation(Path(a.out).read_text(), Path(a.judge)))
        except (CardError, OSError) as e:
            print(f"mocc.card: {e}", file=sys.stderr)
            return 2
        print(f"refreshed the evaluation in {a.out} from {a.judge}/judge.md")
        return 0
    if not (Path(a.run) / "state.json").exists():
        print(f"mocc.card: {a.run} holds no training run", file=sys.stderr)
        return 2
    Path(a.out).write_text(render(Path(a.run), Path(a.eval), Path(a.adapt), Path(a.model), a.notes,
                                     Path(a.oracle), Path(a.judge)))
    shutil.copyfile(Path(a.run) / "metrics.csv", Path(a.model).parent / "MODEL_CARD_metrics.csv")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
