"""Export the actor mean to ONNX with polycc's metadata and golden vectors, and validate such a file.

The file has one input ``obs`` float32 [N, 33] (= [w_thr, w_lat, w_loss] + 10 monitor intervals x
(send_ratio, latency_ratio, latency_gradient), oldest first, raw) and one output ``action`` float32
[N, 1] (the Gaussian mean clipped to +-ACTION_CLIP). ``validate`` is what the Rust side's loader mirrors: it refuses a file
with missing metadata, the wrong shapes, or outputs that do not match its golden vectors.

    python -m mocc.export --checkpoint onnx/runs/train/model.zip --out onnx/mocc.onnx
    python -m mocc.export --untrained --seed 1 --out onnx/mocc.onnx
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from .config import ACTION_ALPHA, ACTION_CLIP, HISTORY, OBS_DIM
from .policy import ActorMean, DeployedActor, normalization_spec

FORMAT = "mocc-1"
OPSET = 17
MAX_MODEL_BYTES = 1 << 20
"""Issue 6: the model file is at most 1 MB."""
GOLDEN_TOLERANCE = 1e-5
OBS_LAYOUT = ("obs[0:3] = weights <w_thr, w_lat, w_loss>; obs[3 + 3*i + k] = monitor interval i "
              "(0 oldest .. 9 newest), feature k: 0 send_ratio (send rate / receive rate), 1 latency_ratio "
              "(MI mean RTT / lowest MI mean RTT), 2 latency_gradient (d RTT / d t over the MI); raw values")
REQUIRED_METADATA = ("polycc.format", "polycc.obs_layout", "polycc.history", "polycc.action_alpha",
                     "polycc.action_clip", "polycc.normalization", "polycc.train_command", "polycc.seed")


class ExportError(Exception):
    """The model cannot be exported, or an exported file is not a valid polycc MOCC model."""


def golden_inputs(seed: int = 0) -> np.ndarray:
    """48 observations: typical histories under several weight vectors plus edge cases."""
    rng = np.random.default_rng(seed)
    weights = [(0.8, 0.1, 0.1), (0.1, 0.8, 0.1), (0.1, 0.1, 0.8), (0.6, 0.3, 0.1), (0.1, 0.6, 0.3),
               (0.3, 0.1, 0.6), (1 / 3, 1 / 3, 1 / 3), (0.45, 0.45, 0.1)]
    rows = []

    def row(w, send, lat, grad):
        hist = np.stack([np.broadcast_to(send, HISTORY), np.broadcast_to(lat, HISTORY),
                         np.broadcast_to(grad, HISTORY)], axis=1).reshape(-1)
        rows.append(np.concatenate([np.asarray(w), hist]))

    for w in weights:  # typical: near-steady state and a filling queue
        row(w, 1.0 + 0.05 * rng.standard_normal(HISTORY), 1.0 + 0.3 * rng.random(HISTORY),
            0.02 * rng.standard_normal(HISTORY))
        row(w, np.linspace(1.0, 1.6, HISTORY), np.linspace(1.0, 3.0, HISTORY), np.full(HISTORY, 0.2))
    for w in weights[:4]:
        row(w, 1.0, 1.0, 0.0)                                      # send_ratio exactly 1, empty queue
        row(w, 1.0, np.geomspace(10, 1e6, HISTORY), 0.0)           # huge latency ratios (beyond the clip)
        row(w, 0.9, 1.5, np.linspace(-0.5, -10, HISTORY))          # negative gradients (a draining queue)
        row(w, np.geomspace(1, 1e5, HISTORY), 2.0, 12.0)           # huge send ratio, gradient past the clip
    for _ in range(16):  # random histories over random weights
        w = rng.dirichlet(np.ones(3))
        row(w, np.exp(rng.normal(0, 0.5, HISTORY)), np.exp(rng.exponential(0.5, HISTORY)),
            rng.normal(0, 0.3, HISTORY))
    return np.asarray(rows, dtype=np.float32)


def unsaturated_inputs(actor: torch.nn.Module, inputs: np.ndarray, outputs: torch.Tensor,
                       want: int = 12) -> np.ndarray:
    """Observations whose action lies inside the clip, found by bisection between golden inputs of
    opposite sign (a trained policy is often bang-bang on the fixed vectors, and a saturated output
    checks little of the graph's arithmetic). Convex combinations keep the weights on the simplex.

    Only well-conditioned points are kept: PyTorch float32 (batched and single), PyTorch float64 and
    onnxruntime agree within a fifth of the tolerance. Near a sign change of a steep policy the last
    layer cancels terms of order 10-100, and float32 runtimes then differ by ~1e-5 among themselves
    (PyTorch batched vs single included), so such a point could not hold any runtime to 1e-5.
    """
    import onnxruntime as ort  # noqa: PLC0415

    y = outputs.numpy()[:, 0]
    if (np.abs(y) < 0.9 * ACTION_CLIP).sum() >= want:
        return np.zeros((0, OBS_DIM), dtype=np.float32)
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y < 0)
    exact = copy.deepcopy(actor).double()
    cands = []
    targets = (-0.5 * ACTION_CLIP, -0.1 * ACTION_CLIP, 0.1 * ACTION_CLIP, 0.5 * ACTION_CLIP)
    for k in range(min(len(pos) * len(neg), 8 * want)):
        a, b = inputs[pos[k % len(pos)]], inputs[neg[(k * 7 + k // len(pos)) % len(neg)]]
        c = targets[k % len(targets)]
        lo, hi = 0.0, 1.0  # f(lo) > c > f(hi)
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            with torch.no_grad():
                f = float(actor(torch.from_numpy((a + mid * (b - a))[None].astype(np.float32)))[0, 0])
            lo, hi = (mid, hi) if f > c else (lo, mid)
        cands.append((a + 0.5 * (lo + hi) * (b - a)).astype(np.float32))
    if not cands:
        return np.zeros((0, OBS_DIM), dtype=np.float32)
    x = np.stack(cands)
    with torch.no_grad():
        y32 = actor(torch.from_numpy(x)).numpy()[:, 0]
        y1 = np.array([float(actor(torch.from_numpy(r[None]))[0, 0]) for r in x])
        y64 = exact(torch.from_numpy(x).double()).numpy()[:, 0]
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(actor, (torch.from_numpy(x[:1]),), f"{d}/m.onnx", input_names=["obs"],
                          output_names=["action"], dynamic_axes={"obs": {0: "N"}, "action": {0: "N"}},
                          opset_version=OPSET, dynamo=False)
        yo = ort.InferenceSession(f"{d}/m.onnx", providers=["CPUExecutionProvider"]).run(["action"], {"obs": x})[0][:, 0]
    spread = np.max(np.abs(np.stack([y32, y1, yo]) - y64), axis=0)
    keep = (np.abs(y32) < 0.9 * ACTION_CLIP) & (spread < GOLDEN_TOLERANCE / 5)
    return x[keep][:want]


def metadata(train_command: str, seed: int, rtt_base: str = "lowest") -> dict[str, str]:
    return {
        "polycc.rtt_base": rtt_base,
        "polycc.format": FORMAT,
        "polycc.obs_layout": OBS_LAYOUT,
        "polycc.history": str(HISTORY),
        "polycc.action_alpha": str(ACTION_ALPHA),
        "polycc.action_clip": str(ACTION_CLIP),
        "polycc.normalization": json.dumps(normalization_spec(), sort_keys=True),
        "polycc.train_command": train_command,
        "polycc.seed": str(seed),
    }


def export(actor: torch.nn.Module, out: str | os.PathLike, train_command: str, seed: int,
           golden_out: str | os.PathLike | None = None, rtt_base: str = "lowest") -> dict:
    """Write ``out`` (+ golden vectors) from ``actor`` ([N, 33] -> [N, 1]); validate; return the golden dict."""
    out = Path(out)
    golden_out = Path(golden_out) if golden_out else out.with_suffix(".golden.json")
    if not train_command.strip():
        raise ExportError("train_command is empty: the metadata must say how the model was trained")
    actor = actor.eval()
    inputs = golden_inputs()
    try:
        with torch.no_grad():
            outputs = actor(torch.from_numpy(inputs))
    except RuntimeError as e:
        raise ExportError(f"the actor does not take observations of [N, {OBS_DIM}]: {e}") from e
    if tuple(outputs.shape) != (len(inputs), 1):
        raise ExportError(f"the actor maps [N, {OBS_DIM}] to {tuple(outputs.shape)}, expected [N, 1]")
    if not torch.isfinite(outputs).all():
        raise ExportError("the actor returns non-finite actions on the golden inputs: refusing to export")
    extra = unsaturated_inputs(actor, inputs, outputs)
    if len(extra):
        inputs = np.concatenate([inputs, extra])
        with torch.no_grad():
            outputs = actor(torch.from_numpy(inputs))
    # An ActorMean is written as its DeployedActor (same function, a third of the operations for
    # tract); the golden outputs stay the trained ActorMean's, so the check below compares the file
    # with the module that was trained.
    graph = DeployedActor(actor).eval() if isinstance(actor, ActorMean) else actor
    if graph is not actor:
        with torch.no_grad():
            err = float((graph(torch.from_numpy(inputs)) - outputs).abs().max())
        if not err <= GOLDEN_TOLERANCE / 5:
            raise ExportError(f"the serving graph differs from the trained actor by {err:.3g} on the golden inputs")
    tmp = out.with_suffix(".onnx.tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(graph, (torch.from_numpy(inputs[:1]),), str(tmp), input_names=["obs"],
                          output_names=["action"], dynamic_axes={"obs": {0: "N"}, "action": {0: "N"}},
                          opset_version=OPSET, dynamo=False)
    import onnx  # noqa: PLC0415

    model = onnx.load(str(tmp))
    for k, v in metadata(train_command, seed, rtt_base).items():
        model.metadata_props.add(key=k, value=v)
    model.producer_name = "polycc-mocc"
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp))
    golden = {"inputs": inputs.tolist(), "outputs": outputs.numpy().astype(np.float32).tolist()}
    validate(tmp, golden)  # before the rename: a bad export never replaces a good file
    os.replace(tmp, out)
    gtmp = golden_out.with_suffix(".json.tmp")
    gtmp.write_text(json.dumps(golden) + "\n")
    os.replace(gtmp, golden_out)
    return golden


def validate(path: str | os.PathLike, golden: dict | str | os.PathLike | None = None) -> dict[str, str]:
    """Check a model file against the interface; with golden vectors, check onnxruntime reproduces them."""
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    path = Path(path)
    if not path.is_file():
        raise ExportError(f"{path}: no such model file")
    size = path.stat().st_size
    if size > MAX_MODEL_BYTES:
        raise ExportError(f"{path}: {size} bytes, over the {MAX_MODEL_BYTES}-byte limit")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:  # onnx raises DecodeError, ValidationError, ...
        raise ExportError(f"{path}: not a valid ONNX model ({type(e).__name__}: {e})") from e
    meta = {p.key: p.value for p in model.metadata_props}
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise ExportError(f"{path}: missing metadata {', '.join(missing)}")
    if meta["polycc.format"] != FORMAT:
        raise ExportError(f"{path}: polycc.format is {meta['polycc.format']!r}, expected {FORMAT!r}")
    if meta["polycc.history"] != str(HISTORY):
        raise ExportError(f"{path}: polycc.history is {meta['polycc.history']}, expected {HISTORY}")
    try:
        json.loads(meta["polycc.normalization"])
    except json.JSONDecodeError as e:
        raise ExportError(f"{path}: polycc.normalization is not JSON ({e})") from e

    def dims(vi):
        return [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]

    ins, outs = model.graph.input, model.graph.output
    if len(ins) != 1 or ins[0].name != "obs" or len(dims(ins[0])) != 2 or dims(ins[0])[1] != OBS_DIM:
        got = [(i.name, dims(i)) for i in ins]
        raise ExportError(f"{path}: expected one input obs [N, {OBS_DIM}], got {got}")
    if len(outs) != 1 or outs[0].name != "action" or len(dims(outs[0])) != 2 or dims(outs[0])[1] != 1:
        got = [(o.name, dims(o)) for o in outs]
        raise ExportError(f"{path}: expected one output action [N, 1], got {got}")
    if golden is not None:
        if not isinstance(golden, dict):
            golden = json.loads(Path(golden).read_text())
        x = np.asarray(golden["inputs"], dtype=np.float32)
        want = np.asarray(golden["outputs"], dtype=np.float32)
        if len(x) < 32 or x.shape[1:] != (OBS_DIM,) or want.shape != (len(x), 1):
            raise ExportError(f"golden vectors: need >= 32 inputs of {OBS_DIM} and outputs of 1, "
                              f"got {x.shape} and {want.shape}")
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = sess.run(["action"], {"obs": x})[0]
        err = float(np.max(np.abs(got - want)))
        if not err <= GOLDEN_TOLERANCE:
            raise ExportError(f"{path}: onnxruntime differs from PyTorch by {err:.3g} (> {GOLDEN_TOLERANCE})")
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="an SB3 PPO .zip saved by mocc.train")
    src.add_argument("--untrained", action="store_true", help="a freshly initialised policy (interface tests)")
    ap.add_argument("--out", default="onnx/mocc.onnx")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-command", default=None, help="recorded in the metadata")
    args = ap.parse_args(argv)
    from .checkpoint import build_model, load_model  # noqa: PLC0415

    try:
        if args.checkpoint:
            model = load_model(args.checkpoint)
            cmd = args.train_command or model_train_command(args.checkpoint)
        else:
            model = build_model(None, seed=args.seed)
            # SB3 initialises the mean head with gain 0.01; a unit gain gives golden outputs of order 1,
            # so a runtime that gets the graph wrong fails the 1e-5 comparison visibly.
            torch.nn.init.orthogonal_(model.policy.action_net.weight, gain=1.0)
            cmd = args.train_command or f"untrained: PYTHONPATH=onnx/python python3 -m mocc.export --untrained --seed {args.seed}"
        base = model_rtt_base(args.checkpoint) if args.checkpoint else "lowest"
        export(ActorMean(model.policy), args.out, cmd, args.seed, rtt_base=base)
        validate(args.out, Path(args.out).with_suffix(".golden.json"))
    except (ExportError, FileNotFoundError, ValueError) as e:
        print(f"mocc.export: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({Path(args.out).stat().st_size} bytes) and its golden vectors")
    return 0


def model_train_command(checkpoint: str) -> str:
    cfg = Path(checkpoint).parent / "config.json"
    if cfg.is_file():
        return json.loads(cfg.read_text()).get("command", f"checkpoint {checkpoint}")
    return f"checkpoint {checkpoint}"


def run_rtt_base(run_config: dict) -> str:
    """The latency base a run's ``config.json`` trained on (``lowest`` for runs before the setting)."""
    return run_config.get("config", {}).get("rtt_base", "lowest")


def model_rtt_base(checkpoint: str) -> str:
    """The latency base the checkpoint's run trained on."""
    cfg = Path(checkpoint).parent / "config.json"
    return run_rtt_base(json.loads(cfg.read_text())) if cfg.is_file() else run_rtt_base({})


if __name__ == "__main__":
    sys.exit(main())
