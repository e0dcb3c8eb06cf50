"""Speed benchmark: our ``Transformer`` against ``torch.nn.Transformer``.

Both models have the same configuration and the same weights at the start (PyTorch's stacks
receive copies of ours, see ``minitransformer.reference``); around ``nn.Transformer`` sit
our embeddings, positional encoding and output projection, so the two compute the same
function. They train on the same batches, step by step, alternating which goes first, and
the script prints the median time of a training step (forward, loss, backward, clipping,
Adam) and of an inference forward pass (eval mode, no gradients), with the ratio ours/PyTorch.

    python benchmarks/speed.py                     # the course's translator and a larger model
    python benchmarks/speed.py --steps 100 --threads 2 --configs small

Timings depend on the machine and on whatever else runs on it; the medians of interleaved
steps and the CPU time of the process (``process_time``) make the ratio robust to load.
This is a script to run by hand, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no busy-waiting threads on a shared CPU

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from minitransformer.data import NumberTranslation  # noqa: E402
from minitransformer.model import Transformer, TransformerConfig  # noqa: E402
from minitransformer.reference import to_torch_transformer  # noqa: E402
from minitransformer.translator import NUMBER_RECIPE  # noqa: E402


class TorchSeq2Seq(nn.Module):
    """Our embeddings and generator around ``nn.Transformer`` (copies of ``ours``' weights)."""

    def __init__(self, ours: Transformer):
        super().__init__()
        self.pad_id = ours.config.pad_id
        self.src_embed = _clone(ours.encoder.embeddings)
        self.tgt_embed = _clone(ours.decoder.embeddings)
        self.transformer = to_torch_transformer(ours)
        self.generator = _clone(ours.generator)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Shapes: src (B, S), tgt (B, T) -> logits (B, T, V)."""
        T = tgt.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)  # (T, T), True = blocked
        x = self.transformer(
            self.src_embed(src),
            self.tgt_embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src == self.pad_id,  # (B, S)
            tgt_key_padding_mask=tgt == self.pad_id,  # (B, T)
            memory_key_padding_mask=src == self.pad_id,  # (B, S)
        )
        return self.generator(x)  # (B, T, V)


def _clone(module: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(module)


CONFIGS = {
    # the course's number translator (notebook 07)
    "small": dict(
        d_model=NUMBER_RECIPE.d_model,
        n_heads=NUMBER_RECIPE.n_heads,
        d_ff=NUMBER_RECIPE.d_ff,
        n_layers=NUMBER_RECIPE.n_layers,
        batch_size=NUMBER_RECIPE.batch_size,
    ),
    # a larger model on the same data, where the matrix products dominate
    "medium": dict(d_model=256, n_heads=8, d_ff=1024, n_layers=3, batch_size=64),
}


def make_models(name: str, data: NumberTranslation, dropout: float) -> tuple[Transformer, TorchSeq2Seq, int]:
    c = dict(CONFIGS[name])
    batch_size = c.pop("batch_size")
    config = TransformerConfig(
        src_vocab_size=len(data.src_vocab), tgt_vocab_size=len(data.tgt_vocab), dropout=dropout, max_len=64, **c
    )
    torch.manual_seed(0)
    ours = Transformer(config)
    theirs = TorchSeq2Seq(ours)
    return ours, theirs, batch_size


def check_same_function(ours: nn.Module, theirs: nn.Module, batch) -> float:
    """Largest difference between the two models' logits (eval mode): they must agree."""
    ours.eval(), theirs.eval()
    with torch.no_grad():
        diff = (ours(batch.src, batch.tgt_in) - theirs(batch.src, batch.tgt_in)).abs().max().item()
    ours.train(), theirs.train()
    return diff


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def bench(name: str, steps: int, warmup_steps: int, dropout: float) -> dict:
    data = NumberTranslation(0)
    ours, theirs, batch_size = make_models(name, data, dropout)
    batches = [data.train_batch(batch_size) for _ in range(steps + warmup_steps)]
    diff = check_same_function(ours, theirs, batches[0])
    assert diff < 1e-4, f"the two models do not compute the same function (max diff {diff:.2e})"
    pad = ours.config.pad_id
    optims = {m: torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9) for m in (ours, theirs)}

    def train_step(model, batch):
        def run():
            model.train()
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=pad, label_smoothing=0.1)
            optims[model].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optims[model].step()

        return run

    def infer_step(model, batch):
        def run():
            model.eval()
            with torch.no_grad():
                model(batch.src, batch.tgt_in)

        return run

    times = {(kind, who): {"wall": [], "cpu": []} for kind in ("train", "infer") for who in ("ours", "torch")}
    for i, batch in enumerate(batches):
        order = [("ours", ours), ("torch", theirs)]
        if i % 2:
            order.reverse()  # alternate who goes first
        for kind, make in (("train", train_step), ("infer", infer_step)):
            for who, model in order:
                wall, cpu = timed(make(model, batch))
                if i >= warmup_steps:
                    times[(kind, who)]["wall"].append(wall)
                    times[(kind, who)]["cpu"].append(cpu)
    med = {k: {c: statistics.median(v[c]) * 1000 for c in v} for k, v in times.items()}
    params = ours.num_parameters()
    return {
        "name": name,
        "params": params,
        "batch": batch_size,
        "diff": diff,
        "median_ms": med,
        "ratios": {
            (kind, clock): med[(kind, "ours")][clock] / med[(kind, "torch")][clock]
            for kind in ("train", "infer")
            for clock in ("wall", "cpu")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="timed steps per model (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2, as the notebooks)")
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {args.steps} timed steps, dropout {args.dropout}")
    header = (
        f"{'config':<8} {'params':>9} {'batch':>5} | {'train ours':>10} {'torch':>8} {'ratio':>6} "
        f"{'(cpu)':>6} | {'infer ours':>10} {'torch':>8} {'ratio':>6} {'(cpu)':>6}"
    )
    rows = []
    for name in args.configs:
        r = bench(name, args.steps, args.warmup, args.dropout)
        m, q = r["median_ms"], r["ratios"]
        rows.append(
            f"{name:<8} {r['params']:>9,} {r['batch']:>5} | {m[('train', 'ours')]['wall']:>8.1f}ms "
            f"{m[('train', 'torch')]['wall']:>6.1f}ms {q[('train', 'wall')]:>5.2f}x {q[('train', 'cpu')]:>5.2f}x | "
            f"{m[('infer', 'ours')]['wall']:>8.1f}ms {m[('infer', 'torch')]['wall']:>6.1f}ms "
            f"{q[('infer', 'wall')]:>5.2f}x {q[('infer', 'cpu')]:>5.2f}x"
        )
        print(rows[-1] if len(rows) > 1 else header + "\n" + rows[-1], flush=True)
    print("ratio = median step time of ours / of torch.nn.Transformer (wall clock; cpu: process time)")


if __name__ == "__main__":
    main()
