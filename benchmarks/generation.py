"""Generation benchmark: tokens per second with and without the key-value cache, by length.

For each model (GPT, notebook 09's, and the modern LLaMA-style model of notebook 10, with
grouped-query heads), each size and each number of generated tokens N, the script generates
N tokens from a short prompt with :func:`minitransformer.generation.generate` three ways: with the
growing cache (``torch.cat`` per step), with the preallocated cache (written in place) and
without a cache (the same tokens: checked), rotating which goes first, and prints the median
throughput (tokens/s) of each and the speed-up of the growing cache over no cache.

    python benchmarks/generation.py                          # default models, sizes and lengths
    python benchmarks/generation.py --threads 2 --lengths 64 256 512 --repeats 5
    python benchmarks/generation.py --models modern --device cuda

Weights are random (speed does not depend on them); ``eos`` is off, so every run generates
exactly N tokens. Timings depend on the machine and its load: the medians of interleaved
runs make the ratio robust. A script to run by hand, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no busy-waiting threads on a shared CPU

import torch  # noqa: E402

from minitransformer.generation import generate  # noqa: E402
from minitransformer.gpt import GPT, GPTConfig  # noqa: E402
from minitransformer.modern import ModernConfig, ModernTransformer  # noqa: E402

SIZES = {  # name: (d_model, n_heads, n_layers)
    "counting": (64, 4, 2),  # the model notebook 09 trains
    "timing": (128, 4, 4),  # the model notebook 09 times
    "wide": (256, 8, 4),
}
WAYS = {"cache": dict(use_cache=True), "preallocated": dict(preallocate=True), "no cache": dict(use_cache=False)}


def build(kind: str, d_model: int, n_heads: int, n_layers: int, max_len: int) -> torch.nn.Module:
    """A model with random weights: GPT-2's architecture, or the modern one with half as many
    key/value heads as query heads and SwiGLU of ≈ 8/3 · d_model."""
    if kind == "gpt":
        config = GPTConfig(
            vocab_size=160,
            max_len=max_len,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=4 * d_model,
            dropout=0.0,
            pad_id=0,
        )
        return GPT(config)
    config = ModernConfig(
        vocab_size=160,
        max_len=max_len,
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=n_heads // 2,
        n_layers=n_layers,
        d_ff=8 * d_model // 3,
        pad_id=0,
    )
    return ModernTransformer(config)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_generation(model: torch.nn.Module, prompt: torch.Tensor, n: int, way: str) -> tuple[float, torch.Tensor]:
    """Seconds to generate ``n`` greedy tokens one of the :data:`WAYS`, and the tokens."""
    device = prompt.device
    _sync(device)
    start = time.perf_counter()
    out = generate(model, prompt, n, temperature=0, **WAYS[way])
    _sync(device)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["gpt", "modern"], choices=["gpt", "modern"])
    parser.add_argument("--sizes", nargs="+", default=["counting", "timing"], choices=sorted(SIZES))
    parser.add_argument("--lengths", nargs="+", type=int, default=[32, 64, 128, 256])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(
        f"device {device}, {torch.get_num_threads()} CPU threads, batch {args.batch}, "
        f"median of {args.repeats} interleaved runs"
    )
    for name in args.sizes:
        d_model, n_heads, n_layers = SIZES[name]
        for kind in args.models:
            torch.manual_seed(0)
            model = build(kind, d_model, n_heads, n_layers, max(args.lengths) + 8).to(device).eval()
            prompt = torch.randint(1, 160, (args.batch, 8), device=device)
            heads = f"n_heads={n_heads}" + (f", n_kv_heads={n_heads // 2}" if kind == "modern" else "")
            print(
                f"\n{kind} {name}: d_model={d_model}, {heads}, n_layers={n_layers}, "
                f"{model.num_parameters():,} parameters"
            )
            print(
                f"{'tokens':>7} {'cache tok/s':>12} {'preallocated tok/s':>19} {'no cache tok/s':>15} {'speed-up':>9}"
            )
            time_generation(model, prompt, 8, "cache")  # warm-up
            ways = list(WAYS)
            for n in args.lengths:
                times: dict[str, list[float]] = {way: [] for way in ways}
                for r in range(args.repeats):
                    outs = {}
                    for way in ways[r % 3 :] + ways[: r % 3]:  # each way goes first in turn
                        seconds, outs[way] = time_generation(model, prompt, n, way)
                        times[way].append(seconds)
                    assert all(torch.equal(outs["cache"], out) for out in outs.values()), "the cache changed the tokens"
                rate = {way: args.batch * n / statistics.median(times[way]) for way in ways}
                print(
                    f"{n:>7} {rate['cache']:>12.0f} {rate['preallocated']:>19.0f} {rate['no cache']:>15.0f} "
                    f"{rate['cache'] / rate['no cache']:>8.1f}×"
                )


if __name__ == "__main__":
    main()
