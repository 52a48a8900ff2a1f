"""examples/train_gpt.py on a CPU: its FLOP count against the analytic one, and a short watched run."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from fakes import GPU, FakeSource

import gpubench
from gpubench.job import watchcmd as watch
from gpubench.job.watcher import WatchOptions
from gpubench.record.config import RecordingConfig
from gpubench.record.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_gpt.py"
TINY = [
    "--layers",
    "2",
    "--width",
    "128",
    "--heads",
    "4",
    "--vocab",
    "512",
    "--seq",
    "64",
    "--batch",
    "2",
    "--device",
    "cpu",
]


def example():
    spec = importlib.util.spec_from_file_location("train_gpt", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("train", [True, False])
def test_count_flops_agrees_with_the_analytic_count(train):
    gpt = example()
    torch.manual_seed(0)
    model = gpt.GPT(vocab=512, seq=128, layers=2, width=128, heads=4)
    x = torch.randint(512, (2, 128))

    def step():
        loss = model(x, x)
        if train:
            loss.backward()

    with torch.set_grad_enabled(train):
        counted = gpubench.count_flops(step)
    expected = gpt.analytic_flops(model, 2, 128, train=train)
    assert counted == pytest.approx(expected, rel=0.03)  # model FLOPs, PaLM's convention, as the formula
    # attention is counted on the CPU too: without it the count would fall short by its share
    attention = (12 if train else 4) * 2 * 128 * 128 * (2 * 128)
    assert counted > expected - attention / 2
    # what the causal kernels run: the kept triangle of each score matrix, forward (2 products) and backward
    # (the 4 of the gradients and the scores recomputed); PaLM's count has 2 and 4 over the whole matrix
    assert counted.hardware == pytest.approx(counted + causal_difference(2, 4, 128, 32, 2, train), abs=1)


def causal_difference(batch: int, heads: int, seq: int, head_dim: int, layers: int, train: bool) -> float:
    """Hardware minus model FLOPs of causal attention: kernels run T(T+1)/2 of the scores, 7 products of them
    in training (forward 2, backward 5 with the recomputed scores), where PaLM counts 6 over T x T."""
    one = 2 * batch * heads * seq * seq * head_dim * layers  # one product over the whole score matrix
    kept = (seq + 1) / (2 * seq)
    return (7 * kept - 6) * one if train else (2 * kept - 2) * one


def test_the_example_runs_two_steps_under_a_watch(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    opts = WatchOptions(
        tmp_path / "run", [GPU], {"name": GPU.name}, RecordingConfig(interval_s=0.05, sources=[FakeSource()])
    )
    argv = [sys.executable, str(EXAMPLE), *TINY, "--steps", "2", "--warmup-steps", "2", "--eval-steps", "2"]
    code, w = watch.run(opts, argv)
    out = capfd.readouterr().out
    assert code == 0, out
    assert "counted by gpubench.count_flops" in out and "analytic" in out and "train: 2 steps in" in out
    manifest, _, summary = load_run(tmp_path / "run")
    assert [p["name"] for p in manifest["phases"]] == ["run", "warmup", "train", "eval"]
    assert manifest["marks"]["steps"] == 6
    phases = {r["phase"]: r for r in summary}
    assert {"warmup", "train", "eval"} <= set(phases)
    for name in ("warmup", "train", "eval"):  # two steps each: a rate from them, or too short to measure
        row = phases[name]
        assert row["steps_reported"] == 2
        rules = row["verdict_rules"]
        assert rules == "too-short" or rules.endswith("one-step") or (row["steps_per_s"] > 0 and row["n_samples"] > 0)


LLAMA = ROOT / "examples" / "train_llama.py"
DECODE = ROOT / "examples" / "decode_llm.py"
TINY_LLAMA = [
    "--layers",
    "2",
    "--width",
    "64",
    "--heads",
    "4",
    "--kv-heads",
    "2",
    "--ffn",
    "128",
    "--vocab",
    "256",
    "--seq",
    "64",
    "--batch",
    "2",
    "--device",
    "cpu",
]


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "extra", [[], ["--experts", "4", "--top", "2"], ["--checkpoint"]], ids=["dense", "experts", "checkpointed"]
)
def test_model_flops_follow_palm_and_hardware_flops_what_ran(extra):
    llama = load(LLAMA)
    args = llama.parse(TINY_LLAMA + extra)
    torch.manual_seed(0)
    model = llama.Llama(
        args.vocab,
        args.seq,
        args.layers,
        args.width,
        args.heads,
        args.kv_heads,
        args.ffn,
        args.experts,
        args.top,
        args.checkpoint,
    )
    x = torch.randint(args.vocab, (args.batch, args.seq))
    counted = gpubench.count_flops(lambda: model(x, x).backward())
    assert counted == pytest.approx(llama.palm_flops(model, args), rel=0.03)  # PaLM's convention
    causal = counted + causal_difference(args.batch, args.heads, args.seq, args.width // args.heads, args.layers, True)
    assert args.checkpoint or counted.hardware < counted  # the kernels skip the masked half PaLM counts
    recomputed = counted.hardware / causal - 1  # a whole forward again when checkpointed
    assert (0.15 < recomputed < 0.5) if args.checkpoint else recomputed == pytest.approx(0, abs=1e-9)


def test_the_decode_example_reports_bytes_and_tokens_under_a_watch(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    opts = WatchOptions(
        tmp_path / "run", [GPU], {"name": GPU.name}, RecordingConfig(interval_s=0.05, sources=[FakeSource()])
    )
    argv = [
        sys.executable,
        str(DECODE),
        "--layers",
        "2",
        "--width",
        "64",
        "--heads",
        "4",
        "--kv-heads",
        "2",
        "--ffn",
        "128",
        "--vocab",
        "256",
        "--max-len",
        "32",
        "--batch",
        "4",
        "--seconds",
        "2",
        "--device",
        "cpu",
    ]
    code, w = watch.run(opts, argv)
    assert code == 0, capfd.readouterr().err
    decode = {r["phase"]: r for r in w.summary}["decode"]
    assert decode["tokens_per_s"] == pytest.approx(4 * decode["steps_per_s"], rel=1e-6)
    assert decode["gbps"] > 0 and decode["tflops"] > 0


def test_decode_bytes_are_the_weights_and_the_cache_so_far():
    dec = load(DECODE)
    model = dec.Decoder(256, 2, 64, 4, 2, 128)
    at = dec.work_model(model, batch=4)
    (f0, b0), (f9, b9) = at(0), at(9)
    cache_per_position = 2 * 2 * 4 * 2 * 16 * 4  # k and v, 2 layers, batch 4, 2 kv heads, 16 wide, fp32
    assert b9 - b0 == pytest.approx(9 * cache_per_position)
    assert b0 > gpubench.weight_bytes(model) - model.embed.weight.nbytes
    assert (
        f9 > f0 > 2 * 4 * sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n) - 1
    )


def test_attention_with_grouped_kv_heads_counts_as_its_query_heads():
    """A GQA attention does the arithmetic of every query head; PyTorch 2.11's formula refused its shapes."""
    import torch.nn.functional as F

    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(2))
    grouped = gpubench.count_flops(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True).sum().backward())
    k4, v4 = (t.detach().repeat_interleave(2, 1).requires_grad_() for t in (k, v))
    repeated = gpubench.count_flops(lambda: F.scaled_dot_product_attention(q, k4, v4).sum().backward())
    assert grouped == repeated and grouped.hardware == repeated.hardware > grouped
