"""Generation benchmark: tokens per second with and without the key-value cache, by length.

For each model size and each number of generated tokens N, the script generates N tokens
from a short prompt with :func:`minitransformer.gpt.generate`, with the cache and without
it (the same tokens: checked), alternating which goes first, and prints the median
throughput (tokens/s) and the speed-up. It also prints the time of one step at the last
length: without the cache a step runs the model over the whole sequence, with it over one
token.

    python benchmarks/generation.py                          # default sizes and lengths
    python benchmarks/generation.py --threads 2 --lengths 64 256 512 --repeats 5
    python benchmarks/generation.py --device cuda

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

from minitransformer.gpt import GPT, GPTConfig, generate  # noqa: E402

SIZES = {  # name: (d_model, n_heads, n_layers)
    "counting": (64, 4, 2),  # the model notebook 09 trains
    "timing": (128, 4, 4),  # the model notebook 09 times
    "wide": (256, 8, 4),
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_generation(model: GPT, prompt: torch.Tensor, n: int, use_cache: bool) -> tuple[float, torch.Tensor]:
    """Seconds to generate ``n`` greedy tokens, and the tokens."""
    device = prompt.device
    _sync(device)
    start = time.perf_counter()
    out = generate(model, prompt, n, temperature=0, use_cache=use_cache)
    _sync(device)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        torch.manual_seed(0)
        config = GPTConfig(
            vocab_size=160,
            max_len=max(args.lengths) + 8,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=4 * d_model,
            dropout=0.0,
            pad_id=0,
        )
        model = GPT(config).to(device).eval()
        prompt = torch.randint(1, config.vocab_size, (args.batch, 8), device=device)
        print(
            f"\n{name}: d_model={d_model}, n_heads={n_heads}, n_layers={n_layers}, "
            f"{model.num_parameters():,} parameters"
        )
        print(f"{'tokens':>7} {'cache tok/s':>12} {'no cache tok/s':>15} {'speed-up':>9}")
        time_generation(model, prompt, 8, True)  # warm-up
        for n in args.lengths:
            times: dict[bool, list[float]] = {True: [], False: []}
            for r in range(args.repeats):
                outs = {}
                for use_cache in (True, False) if r % 2 == 0 else (False, True):
                    seconds, outs[use_cache] = time_generation(model, prompt, n, use_cache)
                    times[use_cache].append(seconds)
                assert torch.equal(outs[True], outs[False]), "the cache changed the tokens"
            with_cache, without = statistics.median(times[True]), statistics.median(times[False])
            print(
                f"{n:>7} {args.batch * n / with_cache:>12.0f} {args.batch * n / without:>15.0f} "
                f"{without / with_cache:>8.1f}×"
            )


if __name__ == "__main__":
    main()
