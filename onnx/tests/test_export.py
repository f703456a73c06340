"""The exported ONNX file: onnxruntime reproduces PyTorch on the golden vectors; bad models are refused."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from mocc.export import MAX_MODEL_BYTES, REQUIRED_METADATA, ExportError, export, golden_inputs, validate
from mocc.policy import ActorMean, ObsNormalizer
from mocc.checkpoint import build_policy

ONNX_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def actor():
    policy = build_policy(seed=3)
    torch.nn.init.orthogonal_(policy.action_net.weight, gain=1.0)  # outputs of order 1, not 0.01
    return ActorMean(policy)


def test_onnxruntime_matches_pytorch_on_golden_vectors(tmp_path, actor):
    golden = export(actor, tmp_path / "m.onnx", "test", seed=3)
    x = np.asarray(golden["inputs"], dtype=np.float32)
    assert len(x) >= 32
    want = actor(torch.from_numpy(x)).detach().numpy()
    assert np.abs(want).max() > 0.1  # the comparison below is not trivially met by zeros
    import onnxruntime as ort
    got = ort.InferenceSession(str(tmp_path / "m.onnx")).run(["action"], {"obs": x})[0]
    assert got.shape == (len(x), 1)
    assert np.max(np.abs(got - want)) <= 1e-5
    meta = validate(tmp_path / "m.onnx", tmp_path / "m.golden.json")
    assert meta["polycc.format"] == "mocc-1" and meta["polycc.history"] == "10"
    assert json.loads(meta["polycc.normalization"])["inside_graph"] is True


def test_golden_vectors_cover_the_edge_cases():
    x = golden_inputs()
    hist = x[:, 3:].reshape(len(x), 10, 3)
    assert (hist[:, :, 0] == 1.0).all(axis=1).any()          # send_ratio exactly 1
    assert hist[:, :, 1].max() >= 1e5                         # huge latency ratios
    assert (hist[:, :, 2] < 0).all(axis=1).any()              # negative gradients
    assert len({tuple(np.round(w, 3)) for w in x[:, :3]}) >= 8  # several weight vectors
    assert np.allclose(x[:, :3].sum(axis=1), 1, atol=1e-6)


def test_normalizer_clips_and_logs():
    h = torch.tensor([[1.0, 1.0, 0.0] * 10, [1e9, 1e9, -1e9] * 10, [0.0, 0.5, 0.1] * 10])
    y = ObsNormalizer()(h).reshape(3, 10, 3)
    assert torch.allclose(y[0], torch.zeros(10, 3))
    assert torch.allclose(y[1, :, 0], torch.full((10,), np.log(1e3)))
    assert torch.allclose(y[1, :, 2], torch.full((10,), -5.0))
    assert torch.allclose(y[2, :, 0], torch.full((10,), np.log(1e-3)))
    assert torch.allclose(y[2, :, 1], torch.zeros(10))  # latency ratio below 1 is clipped to 1
    assert torch.isfinite(y).all()


def test_shipped_model_validates_against_its_golden_vectors():
    meta = validate(ONNX_DIR / "mocc.onnx", ONNX_DIR / "mocc.golden.json")
    assert set(REQUIRED_METADATA) <= set(meta)
    assert (ONNX_DIR / "mocc.onnx").stat().st_size <= MAX_MODEL_BYTES


def _strip_metadata(src: Path, dst: Path, key: str) -> None:
    m = onnx.load(str(src))
    keep = [(p.key, p.value) for p in m.metadata_props if p.key != key]
    del m.metadata_props[:]
    for k, v in keep:
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(dst))


def test_validate_refuses_missing_metadata_corrupt_files_and_wrong_outputs(tmp_path, actor):
    export(actor, tmp_path / "m.onnx", "test", seed=3)
    _strip_metadata(tmp_path / "m.onnx", tmp_path / "nometa.onnx", "polycc.normalization")
    with pytest.raises(ExportError, match="missing metadata polycc.normalization"):
        validate(tmp_path / "nometa.onnx")
    (tmp_path / "corrupt.onnx").write_bytes((tmp_path / "m.onnx").read_bytes()[:500])
    with pytest.raises(ExportError, match="not a valid ONNX model"):
        validate(tmp_path / "corrupt.onnx")
    with pytest.raises(ExportError, match="no such model file"):
        validate(tmp_path / "absent.onnx")
    golden = json.loads((tmp_path / "m.golden.json").read_text())
    golden["outputs"][5][0] += 1e-3
    with pytest.raises(ExportError, match="differs from PyTorch"):
        validate(tmp_path / "m.onnx", golden)
    big = tmp_path / "big.onnx"
    big.write_bytes(b"\0" * (MAX_MODEL_BYTES + 1))
    with pytest.raises(ExportError, match="over the"):
        validate(big)


def test_export_refuses_wrong_shapes_and_non_finite_actions(tmp_path, actor):
    class TwoActions(torch.nn.Module):
        def forward(self, obs):
            return torch.cat([obs[:, :1], obs[:, 1:2]], dim=1)

    with pytest.raises(ExportError, match=r"expected \[N, 1\]"):
        export(TwoActions(), tmp_path / "two.onnx", "test", seed=0)

    class Exploding(torch.nn.Module):
        def forward(self, obs):
            return torch.log(obs[:, 3:4] - 1.0)  # -inf at send_ratio 1

    with pytest.raises(ExportError, match="non-finite"):
        export(Exploding(), tmp_path / "nan.onnx", "test", seed=0)
    with pytest.raises(ExportError, match=r"does not take observations of \[N, 33\]"):
        export(torch.nn.Linear(30, 1), tmp_path / "in30.onnx", "test", seed=0)
    with pytest.raises(ExportError, match="train_command"):
        export(actor, tmp_path / "x.onnx", "  ", seed=0)
    assert not (tmp_path / "two.onnx").exists() and not (tmp_path / "nan.onnx").exists()


def test_evaluate_reports_every_target_with_numbers(tmp_path):
    import sys as _sys
    from fake_gym import fake_backend
    from mocc.evaluate import DEFAULT_SIM, main as evaluate_main, spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) == 0.0
    sim = Path(DEFAULT_SIM)
    rc = evaluate_main(["--model", str(ONNX_DIR / "mocc.onnx"), "--links", "2", "--objectives", "5", "--steps", "30",
                        "--sim", str(sim), "--out", str(tmp_path)], backend=fake_backend)
    assert rc in (0, 1)
    res = json.loads((tmp_path / "eval.json").read_text())
    assert len(res["cases"]) == 4 and len(res["landmarks"]) == 36
    assert all(0 <= r["utilization"] <= 1.0 and r["rtt_ratio"] >= 1.0 for r in res["landmarks"])
    if sim.is_file():
        assert {"mocc", "cubic", "bbr", "vivace"} <= set(res["median_reward"])
    assert "| 36 landmarks |" in (tmp_path / "eval.md").read_text()
    assert -1.0 <= res["oracle"]["spearman_lat"] <= 1.0 and len(res["oracle"]["rtt_ratio"]) == 36
    assert (tmp_path / "landmarks.png").stat().st_size > 1000


def test_the_serving_graph_computes_the_trained_actor_with_a_third_of_the_operations(tmp_path, actor):
    from mocc.policy import DeployedActor

    rng = np.random.default_rng(5)
    w = rng.dirichlet(np.ones(3), size=2000)
    hist = np.stack([np.exp(rng.normal(0, 3, (2000, 10))), np.exp(rng.exponential(3, (2000, 10))),
                     rng.normal(0, 4, (2000, 10))], axis=2).reshape(2000, 30)  # well past every clip
    x = torch.from_numpy(np.concatenate([golden_inputs(), np.concatenate([w, hist], 1)]).astype(np.float32))
    with torch.no_grad():
        want, got = actor(x), DeployedActor(actor)(x)
    assert want.abs().max() > 0.1 and float((got - want).abs().max()) <= 1e-6
    export(actor, tmp_path / "m.onnx", "test", seed=3)
    ops = [n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node]
    # ActorMean traced directly is 54 nodes (slices, clips, concats, reshapes); tract ran 44 of them.
    assert len(ops) <= 16 and ops.count("Gemm") == 4 and not {"Slice", "Concat", "Reshape"} & set(ops), ops
    import onnxruntime as ort

    y = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        ["action"], {"obs": x.numpy()})[0]
    assert float(np.abs(y - want.numpy()).max()) <= 1e-5


def test_oracle_compares_the_queue_ranges_with_numbers(tmp_path):
    from fake_gym import fake_backend
    from mocc.evaluate import envelope_links
    from mocc.oracle import main as oracle_main

    mocc_q = [link.queue_packets for link in envelope_links(400, 1)]
    aurora_q = [link.queue_packets for link in envelope_links(400, 1, 8.0)]
    assert max(mocc_q) <= 56 and 500 < max(aurora_q) <= 2982 and np.median(aurora_q) > 2 * np.median(mocc_q)
    assert envelope_links(10, 11) == envelope_links(10, 11, 4.0)  # mocc.evaluate's set is unchanged
    rc = oracle_main(["--links", "3", "--seeds", "1,2", "--steps", "20", "--out", str(tmp_path), "--no-progress"],
                     backend=fake_backend)
    assert rc in (0, 1)
    res = json.loads((tmp_path / "oracle.json").read_text())
    assert len(res["rows"]) == 4 and set(res["summary"]) == {"mocc/3", "aurora/3"}
    assert all(-1.0 <= r["spearman_lat"] <= 1.0 and len(r["queue_packets"]) == 3 for r in res["rows"])
    assert rc == (0 if any(s["oracle"]["met"] for s in res["summary"].values()) else 1)
    assert all(-1.0 <= r["spearman_lat_per_link"] <= 1.0 for r in res["rows"])
    assert all(np.isnan(r["loss_position"]) or -0.5 <= r["loss_position"] <= 1.5 for r in res["rows"])
    assert "| aurora | 3 | 2 |" in (tmp_path / "oracle.md").read_text()
    assert (tmp_path / "oracle.png").stat().st_size > 1000
    with pytest.raises(SystemExit):
        oracle_main(["--ranges", "lan"], backend=fake_backend)


def test_loss_position_reads_where_w_loss_moves_the_rtt():
    from mocc.evaluate import spearman
    from mocc.objectives import landmarks
    from mocc.oracle import loss_position, rtt_slopes

    w = np.asarray(landmarks())
    t, lat, loss = w.T
    # RTT following w_thr alone: w_loss lowers it as w_lat does (position 0, Spearman lat 0.47);
    # following w_thr - w_lat: w_loss neutral (0.5, 0.85); following -w_lat alone: w_loss like w_thr (1, 1.0).
    for rtt, pos, lat_s in ((1 + t, 0.0, 0.469), (1.5 + t - lat, 0.5, 0.852), (2 - lat, 1.0, 1.0)):
        assert loss_position(w, rtt) == pytest.approx(pos, abs=0.02)
        assert spearman(lat, -rtt) == pytest.approx(lat_s, abs=0.005)
    assert loss_position(w, 1 + t + 0.25 * loss) == pytest.approx(0.25, abs=0.05)  # ranks bend it a little
    assert rtt_slopes(w, 1 + 0.03 * t - 0.01 * lat) == pytest.approx({"rtt_per_thr": 0.003, "rtt_per_lat": -0.001})


def test_oracle_runs_the_model_beside_it_on_the_same_links(tmp_path):
    from fake_gym import fake_backend
    from mocc.oracle import main as oracle_main

    rc = oracle_main(["--ranges", "aurora", "--links", "2", "--seeds", "3", "--steps", "20", "--model",
                      str(ONNX_DIR / "mocc.onnx"), "--out", str(tmp_path), "--no-progress"], backend=fake_backend)
    assert rc in (0, 1)
    res = json.loads((tmp_path / "oracle.json").read_text())
    m = res["rows"][0]["model"]
    assert len(m["rtt_ratio"]) == 36 and min(m["rtt_ratio"]) >= 1.0 and 0 < max(m["utilization"]) <= 1.0
    assert -1.0 <= m["spearman_lat"] <= 1.0 and -1.0 <= m["spearman_lat_per_link"] <= 1.0
    s = res["summary"]["aurora/2"]
    assert set(s) >= {"oracle", "model"} and s["model"]["sets_meeting"] in (0, 1)
    md = (tmp_path / "oracle.md").read_text()
    assert "| aurora | 2 | 1 | model |" in md and "| 0.8 | 0.1 | 0.1 |" in md
    assert oracle_main(["--model", str(tmp_path / "missing.onnx"), "--out", str(tmp_path)], backend=fake_backend) == 2


def test_the_model_says_which_latency_base_it_was_trained_on_and_evaluation_follows_it(tmp_path, actor):
    from mocc.env import with_rtt_base
    from mocc.evaluate import OnnxActor

    export(actor, tmp_path / "old.onnx", "test", seed=3)
    export(actor, tmp_path / "new.onnx", "test", seed=3, rtt_base="lowest-10s")
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "new.onnx")).metadata_props}
    assert meta["polycc.rtt_base"] == "lowest-10s"
    assert OnnxActor(str(tmp_path / "old.onnx")).rtt_base == "lowest"
    assert OnnxActor(str(tmp_path / "new.onnx")).rtt_base == "lowest-10s"
    # The backend an evaluation builds its links with carries the model's base.
    made = []

    def backend(link, seed, steps, rtt_base="lowest"):
        made.append(rtt_base)

    with_rtt_base(backend, "lowest-10s")("envelope", 1, 5)
    with_rtt_base(backend, "lowest")("envelope", 1, 5)
    assert made == ["lowest-10s", "lowest"]
    with pytest.raises(ValueError, match="lowest, lowest-10s"):
        with_rtt_base(backend, "lowest-5s")
