"""A Llama-style decoder of about 400 M parameters (a config, random weights, nothing downloaded) generating
with Hugging Face's `generate` and its KV cache, greedy, bf16: a batch-1 chat turn and a batch-32 offline
run, one after the other, knowing nothing of gpubench.

    gpubench watch -- python examples/unmodified/generate_kv.py --seconds 20

Watched, its steps are the calls of its model inside generate: a prefill, then one decode step per new token,
each decode step counted once (gpubench.inside.forwards); run one batch size a watch for a row of each. It prints
its own count for each batch: the model's forwards per second over whole calls of generate, timed with CUDA
events; decode steps per second (the prefill left out); tokens per second; and the bytes a decode step reads at
the middle of its run: the weights once (of the input embedding table, a row a sequence) and the KV cache
(2 x layers x KV heads x head width x the positions so far x batch x 2 bytes).
"""

import argparse
import time
from contextlib import contextmanager

import torch
from transformers import LlamaConfig, LlamaForCausalLM


@contextmanager
def timed(into: list):
    """Seconds of the block on the GPU clock (CUDA events), on the host's where there is no GPU."""
    if torch.cuda.is_available():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        end.synchronize()
        into.append(start.elapsed_time(end) / 1e3)
    else:
        t = time.perf_counter()
        yield
        into.append(time.perf_counter() - t)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=20.0, help="per batch size")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new", type=int, default=256, help="tokens generated per call")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--tiny", action="store_true", help="small enough for a CPU (a smoke test)")
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size = (
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
        )
        if args.tiny
        else dict(
            hidden_size=1024,
            intermediate_size=4096,
            num_hidden_layers=24,
            num_attention_heads=16,
            num_key_value_heads=8,
            vocab_size=32000,
        )
    )
    config = LlamaConfig(max_position_embeddings=4096, **size)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device, torch.bfloat16).eval()
    # a decode step reads every weight once but the input embedding table, of which it looks up a row a sequence
    table = model.get_input_embeddings().weight
    weights = sum(t.numel() * t.element_size() for t in model.parameters()) - table.numel() * table.element_size()
    head = config.hidden_size // config.num_attention_heads
    for batch in (int(b) for b in args.batches.split(",")):
        prompt = torch.randint(config.vocab_size, (batch, args.prompt), device=device)
        times, t0 = [], time.perf_counter()
        while time.perf_counter() - t0 < args.seconds or len(times) < 2:
            with timed(times):
                out = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=args.new,
                    min_new_tokens=args.new,
                    do_sample=False,
                    use_cache=True,
                    pad_token_id=0,
                )
            assert out.shape == (batch, args.prompt + args.new)
        times = times[1:]  # the first call warms up
        prefill = []
        with torch.no_grad(), timed(prefill):  # the prefill's share, from one prefill alone
            model(prompt)
        call_s = sum(times) / len(times)
        decode_s = call_s - prefill[0]
        steps = args.new - 1  # the first new token comes from the prefill
        rows = batch * table.shape[1] * table.element_size()
        positions = args.prompt + args.new // 2
        kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head * positions * batch * 2
        print(
            f"own count at batch {batch}: {args.new / call_s:.6g} forwards/s (a prefill and {steps} decode steps a "
            f"call) on the GPU clock over {len(times)} calls of generate; {steps / decode_s:.6g} decode steps/s; "
            f"{batch * args.new / call_s:.6g} tokens/s; {weights + rows + kv:.6g} bytes a decode step ({weights:.6g} "
            f"of weights, {rows:.6g} of embedding rows, {kv:.6g} of KV cache at its middle)",
            flush=True,
        )


if __name__ == "__main__":
    main()
