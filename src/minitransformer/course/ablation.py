"""An ablation: the modern model against notebook 09's, changing one thing at a time.

The task is notebook 09's counting corpus, counting to 1000 instead of 100, so that a model
cannot learn its lines by heart in the steps it trains: a share of the lines is held out,
never trained on, and every variant is scored by its loss on them (under the honest causal
mask), next to the corpus's floor, the loss of the distribution the lines are drawn from.

Every variant trains on the same batches (drawn from the seed), for the same steps, with the
same optimiser and learning-rate schedule (AdamW, no warm-up, cosine decay). Only the
variant's one change differs, so the difference between a variant and the modern model
trained from the same seed is that change (or chance): :func:`verdicts` pairs the seeds and
decides with an exact sign test.

Letters: B batch, T length, V vocabulary.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ..data import pad_sequences
from ..i18n import check_lang, decimal, error, tr
from ..modern import ModernConfig, ModernTransformer
from ..train import lm_loss, train
from .corpus import LANG_TAGS, CountingCorpus

__all__ = [
    "AblationSetup",
    "FULL_SETUP",
    "LIVE_SETUP",
    "Variant",
    "VARIANTS",
    "CountingTask",
    "counting_task",
    "train_variant",
    "run_ablation",
    "sign_test",
    "Verdict",
    "verdicts",
    "format_table",
    "MEASURED",
    "MEASURED_SEEDS",
]


@dataclass(frozen=True)
class AblationSetup:
    """What every variant shares."""

    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff_swiglu: int = 172  # ≈ 8/3 · d_model: three matrices with the parameters of two of 4 · d_model
    d_ff_plain: int = 256  # 4 · d_model, the paper's ratio
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.0
    clip_norm: float = 1.0
    max_number: int = 1000  # the corpus counts from 0 to 999 (notebook 09's, to 99)
    max_count: int = 5  # numbers per line: 2 to 5, as in notebook 09
    held_out: float = 0.1  # share of the corpus's lines never trained on, to score the variants
    split_seed: int = 12345  # which lines are held out


# The table that benchmarks/ablation.py measures, and the smaller run notebook 10 makes live.
FULL_SETUP = AblationSetup()
LIVE_SETUP = AblationSetup(steps=80, batch_size=8)


@dataclass(frozen=True)
class Variant:
    """One row of the ablation: a name, its label in each language and what changes."""

    name: str
    es: str
    en: str
    change: dict = field(default_factory=dict)  # fields of ModernConfig that differ from the modern model
    model: str = "modern"  # "modern" or "gpt" (notebook 09's model)
    leaky_mask: bool = False  # trained with a mask that also lets each position see the next token

    def build(self, vocab_size: int, max_len: int, pad_id: int, setup: AblationSetup) -> nn.Module:
        """A fresh model for this variant (its weights come from the current random state)."""
        if self.model == "gpt":
            from ..gpt import GPT, GPTConfig

            return GPT(
                GPTConfig(
                    vocab_size=vocab_size,
                    max_len=max_len,
                    d_model=setup.d_model,
                    n_heads=setup.n_heads,
                    n_layers=setup.n_layers,
                    d_ff=setup.d_ff_plain,
                    dropout=0.0,
                    pad_id=pad_id,
                )
            )
        d_ff = setup.d_ff_swiglu if self.change.get("feed_forward", "swiglu") == "swiglu" else setup.d_ff_plain
        config = ModernConfig(
            vocab_size=vocab_size,
            d_model=setup.d_model,
            n_heads=setup.n_heads,
            n_layers=setup.n_layers,
            d_ff=d_ff,
            max_len=max_len,
            **self.change,
        )
        return ModernTransformer(config)


VARIANTS: tuple[Variant, ...] = (
    Variant("modern", "moderno (LLaMA)", "modern (LLaMA)"),
    Variant("gpt", "GPT-2 del cuaderno 09", "notebook 09's GPT-2", model="gpt"),
    Variant("sinusoidal", "posiciones sinusoidales", "sinusoidal positions", {"positional": "sinusoidal"}),
    Variant("learned", "posiciones aprendidas", "learned positions", {"positional": "learned"}),
    Variant("layernorm", "LayerNorm, no RMSNorm", "LayerNorm, not RMSNorm", {"norm": "layer"}),
    Variant("relu", "ReLU, no SwiGLU", "ReLU, not SwiGLU", {"feed_forward": "relu"}),
    Variant("post_norm", "post-norm sin calentamiento", "post-norm, no warm-up", {"norm_first": False}),
    Variant("no_scale", "sin dividir entre √d_k", "no division by √d_k", {"scale_scores": False}),
    Variant("leaky_mask", "máscara causal rota", "broken causal mask", leaky_mask=True),
)


@dataclass
class CountingTask:
    """The counting corpus split in two: lines to train on and held-out lines to score on."""

    corpus: CountingCorpus
    train_lines: list[tuple[str, int, int]]  # (language, count, first number) of each training line
    held_out: Tensor  # (N, L) every held-out line, right-padded
    floor: float  # the loss per token on ``held_out`` of the distribution the corpus draws lines from
    batch_size: int

    def next_batch(self, rng: random.Random) -> Tensor:
        """``batch_size`` training lines drawn as the corpus draws them, held-out ones excluded. -> (B, L)."""
        rows = []
        while len(rows) < self.batch_size:
            lang, count, start = _draw(self.corpus, rng)
            if (lang, count, start) in self._train:
                rows.append(self.corpus.line(start, count, lang))
        return pad_sequences(rows, self.corpus.vocab.pad_id)

    def __post_init__(self):
        self._train = set(self.train_lines)


# How CountingCorpus draws a line: a language, then how many numbers, then the first one, each
# uniformly. Written here as (language, count, first number), so that lines can be held out.


def _draw(corpus: CountingCorpus, rng: random.Random) -> tuple[str, int, int]:
    lang = rng.choice(sorted(LANG_TAGS))
    count = rng.randint(corpus.min_count, corpus.max_count)
    return lang, count, rng.randrange(corpus.max_number - count + 1)


def _every_line(corpus: CountingCorpus) -> list[tuple[str, int, int]]:
    return [
        (lang, count, start)
        for lang in sorted(LANG_TAGS)
        for count in range(corpus.min_count, corpus.max_count + 1)
        for start in range(corpus.max_number - count + 1)
    ]


def _log_prob(corpus: CountingCorpus, lang: str, count: int, start: int) -> float:
    """log P(line) under the draw above (each line is one (language, count, first number))."""
    counts = corpus.max_count - corpus.min_count + 1
    return -math.log(len(LANG_TAGS)) - math.log(counts) - math.log(corpus.max_number - count + 1)


def counting_task(setup: AblationSetup = FULL_SETUP) -> CountingTask:
    """The corpus of ``setup``, its lines split once (``setup.split_seed``) into training and held-out
    lines, and the floor of the held-out loss."""
    corpus = CountingCorpus(setup.max_number, min_count=2, max_count=setup.max_count)
    lines = _every_line(corpus)
    held = set(random.Random(setup.split_seed).sample(lines, round(setup.held_out * len(lines))))
    if not held or len(held) == len(lines):
        raise error(
            f"held_out = {setup.held_out} no deja líneas para entrenar y para puntuar",
            f"held_out = {setup.held_out} leaves no lines to train on and to score on",
        )
    held_lines = sorted(held)
    ids = [corpus.line(start, count, lang) for lang, count, start in held_lines]
    nats = -sum(_log_prob(corpus, *line) for line in held_lines)
    targets = sum(len(line) - 1 for line in ids)  # every token after <bos> is predicted
    return CountingTask(
        corpus,
        [line for line in lines if line not in held],
        pad_sequences(ids, corpus.vocab.pad_id),
        nats / targets,
        setup.batch_size,
    )


def _leaky_mask(T: int, device) -> Tensor:
    """The off-by-one causal mask: position t sees t + 1 too. Shapes: -> (1, 1, T, T)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril(1)[None, None]


def train_variant(variant: Variant, task: CountingTask, seed: int, setup: AblationSetup = FULL_SETUP) -> float:
    """Train one variant from seed ``seed`` and return its loss on the held-out lines (honest causal mask).

    The batches come from ``random.Random(seed)``, so every variant with the same seed sees the
    same ones, and its weights from ``torch.manual_seed(seed)``.
    """
    pad_id, held_out = task.corpus.vocab.pad_id, task.held_out
    max_len = 2 * held_out.size(1) + 8
    torch.manual_seed(seed)
    model = variant.build(len(task.corpus.vocab), max_len, pad_id, setup)

    def loss(model: nn.Module, tokens: Tensor) -> Tensor:
        mask = _leaky_mask(tokens.size(1), tokens.device) if variant.leaky_mask else None
        return lm_loss(model(tokens, mask=mask) if mask is not None else model(tokens), tokens, pad_id)

    rng = random.Random(seed)
    train(
        model,
        lambda: task.next_batch(rng),  # (B, T)
        setup.steps,
        loss_fn=loss,
        make_optimizer=lambda params: torch.optim.AdamW(
            params, lr=setup.lr, betas=(0.9, 0.95), weight_decay=setup.weight_decay
        ),
        schedule=lambda step: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / setup.steps)),  # no warm-up
        clip_norm=setup.clip_norm,
        progress=False,
    )
    with torch.no_grad():
        return lm_loss(model(held_out), held_out, pad_id).item()  # every model: the causal mask


def run_ablation(
    task: CountingTask,
    seeds: tuple[int, ...] | list[int] = (0, 1, 2),
    variants: tuple[Variant, ...] | list[Variant] = VARIANTS,
    setup: AblationSetup = FULL_SETUP,
    progress: bool = False,
    threads: int | None = 1,
) -> dict[str, list[float]]:
    """Held-out loss of every variant for every seed, in the order of ``seeds``: {name: [loss per seed]}.

    ``threads``: CPU threads while training (models this small run fastest on one, and then
    the numbers do not depend on the machine's thread count); None keeps the current setting.
    """
    if not seeds:
        raise error("hace falta al menos una semilla", "at least one seed is needed")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    results: dict[str, list[float]] = {}
    try:
        for variant in variants:
            start = time.perf_counter()
            results[variant.name] = [train_variant(variant, task, s, setup) for s in seeds]
            if progress:
                print(f"{variant.name}: {results[variant.name]} ({time.perf_counter() - start:.0f} s)", flush=True)
    finally:
        torch.set_num_threads(previous)
    return results


# --- verdicts ---------------------------------------------------------------------------


def sign_test(worse: int, better: int) -> float:
    """The exact two-sided sign test: the probability, if worse and better were equally likely
    for each seed, of a split at least as uneven as ``worse`` against ``better`` (ties left out)."""
    n, k = worse + better, min(worse, better)
    if worse < 0 or better < 0:
        raise error("los recuentos deben ser ≥ 0", "the counts must be ≥ 0")
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


@dataclass(frozen=True)
class Verdict:
    """A variant against the modern model, seed by seed."""

    name: str
    mean: float  # mean held-out loss over the seeds
    delta: float  # mean over the seeds of (variant − modern model with the same seed)
    worse: int  # seeds on which the variant's loss is higher than the modern model's
    better: int  # seeds on which it is lower
    p: float  # the exact two-sided sign test of worse against better
    call: str  # "worse" or "better" when p ≤ alpha, "undecided" otherwise

    def label(self, lang: str = "es") -> str:
        return {
            "worse": tr(lang, "peor", "worse"),
            "better": tr(lang, "mejor", "better"),
            "undecided": tr(lang, "sin diferencia demostrada", "no difference shown"),
        }[self.call]


def verdicts(results: dict[str, list[float]], base: str = "modern", alpha: float = 0.05) -> dict[str, Verdict]:
    """Each variant of ``results`` (but ``base``) against ``base``, the seeds paired by position."""
    if base not in results:
        raise error(f"faltan los resultados de {base!r}", f"the results of {base!r} are missing")
    reference = results[base]
    out = {}
    for name, losses in results.items():
        if name == base:
            continue
        if len(losses) != len(reference):
            raise error(
                f"{name} tiene {len(losses)} semillas y {base} {len(reference)}: hacen falta las mismas",
                f"{name} has {len(losses)} seeds and {base} {len(reference)}: the same ones are needed",
            )
        diffs = [a - b for a, b in zip(losses, reference)]
        worse, better = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        p = sign_test(worse, better)
        call = "undecided" if p > alpha else ("worse" if worse > better else "better")
        out[name] = Verdict(name, statistics.fmean(losses), statistics.fmean(diffs), worse, better, p, call)
    return out


def format_table(results: dict[str, list[float]], lang: str = "es", floor: float | None = None, digits: int = 3) -> str:
    """The ablation as a text table in ``lang`` (decimal comma in Spanish): per variant the mean
    held-out loss, its excess over ``floor`` (when given), and the verdict of :func:`verdicts`."""
    check_lang(lang)
    labels = {v.name: tr(lang, v.es, v.en) for v in VARIANTS}
    calls = verdicts(results)
    n_seeds = len(results["modern"])

    def num(x: float, sign: bool = False, places: int = digits) -> str:
        text = decimal(x, places, lang)
        return "+" + text if sign and not text.startswith("-") else text

    head = [
        tr(lang, "variante", "variant"),
        tr(lang, "pérdida", "loss"),
        *([tr(lang, "− suelo", "− floor")] if floor is not None else []),
        "Δ",
        tr(lang, "peor en", "worse in"),
        "p",
        tr(lang, "veredicto", "verdict"),
    ]
    body = []
    for name, losses in results.items():
        mean = statistics.fmean(losses)
        row = [labels.get(name, name), num(mean), *([num(mean - floor)] if floor is not None else [])]
        if name == "modern":
            row += ["", "", "", tr(lang, "(referencia)", "(reference)")]
        else:
            v = calls[name]
            row += [num(v.delta, sign=True), f"{v.worse}/{n_seeds}", num(v.p, places=3), v.label(lang)]
        body.append(row)
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    last = len(head) - 1
    lines = [
        "  ".join(c.ljust(w) if i in (0, last) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
        for row in [head] + body
    ]
    lines.insert(1, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


# measured by benchmarks/ablation.py (FULL_SETUP): held-out loss per seed, in the order of MEASURED_SEEDS
# (torch 2.13.0+cpu, x86_64, one thread per run)
MEASURED_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
MEASURED: dict[str, list[float]] = {
    "modern": [0.649805, 0.642941, 0.64461, 0.647956, 0.645681, 0.657676, 0.646273, 0.648518, 0.646561, 0.649545],
    "gpt": [0.915873, 0.901166, 0.90825, 0.879693, 0.92656, 0.889095, 0.881296, 0.949794, 0.907537, 0.883053],
    "sinusoidal": [1.509635, 1.405736, 1.46512, 1.454526, 1.460474, 1.487081, 1.437207, 1.515793, 1.555071, 1.37487],
    "learned": [0.659943, 0.656124, 0.664022, 0.663714, 0.662771, 0.662777, 0.663078, 0.653276, 0.648457, 0.661946],
    "layernorm": [0.654204, 0.645523, 0.643109, 0.651477, 0.651268, 0.657211, 0.648491, 0.649455, 0.645387, 0.649336],
    "relu": [0.667564, 0.659255, 0.653068, 0.656108, 0.669212, 0.659741, 0.650246, 0.66138, 0.658545, 0.652977],
    "post_norm": [0.920463, 0.875512, 0.853123, 0.837941, 0.852594, 0.855972, 0.909978, 0.788222, 0.8547, 0.850083],
    "no_scale": [0.646271, 0.639615, 0.640288, 0.642475, 0.647353, 0.652338, 0.637491, 0.64194, 0.642269, 0.645357],
    "leaky_mask": [5.659249, 5.988626, 6.94558, 6.280802, 8.082565, 6.888166, 7.160923, 6.051988, 7.571914, 7.172717],
}
