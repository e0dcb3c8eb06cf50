"""Notebook 12's language model: the course's prose, its tokenizer, the modern decoder trained on it, its
checkpoints and the stored longer run.

The corpus is :func:`~minitransformer.course.prose.prose`, both languages: every notebook of the snapshot but 10 is
training text, notebook 10's prose is held out. The tokenizer is the byte-level BPE of notebook 11
(:func:`~minitransformer.tokenizer.train_bpe`) trained on the training text; the model is notebook 10's
:class:`~minitransformer.modern.ModernTransformer`, trained by :func:`~minitransformer.train.train_gpt` (AdamW,
warm-up and cosine decay, gradient clipping) on random windows of the training text's tokens. Training and
held-out loss are measured on fixed windows every ``eval_every`` steps, in bits per byte (the windows' nats over
the bytes their tokens decode to), so that the curve speaks the unit of the compressors it is compared with.

Three runs ship inside the package (``reference_runs/``, rebuilt by ``tools/prose_runs.py``): the recipe's run
with seed 0, the model notebook 12 trains live; the same recipe run longer, whose held-out curve notebook 12
draws; and the recipe with seed :data:`PARTNER_SEED`, the partner notebook 12 mixes with its live model when it
compresses (with a live model of that seed, the partner is the recipe's run of seed 0: :func:`reference_partner`).
Notebook 13 opens the first two without training. How notebook 12 compresses (:data:`CODING`, the n-grams'
:data:`NGRAM` and :data:`ADAPTING_NGRAM`) was chosen on training text only (:func:`validation_split`, with its own
tokenizer, :func:`validation_tokenizer`), and what the tool measured is stored beside the runs
(:func:`reference_coding`).

Letters: B batch, T context, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..compression import bits_per_byte
from ..i18n import error, say
from ..model_compressor import CodingSettings, model_bits_per_byte
from ..modern import ModernConfig, ModernTransformer
from ..runtime import eval_mode
from ..runtime import seed as current_seed
from ..tokenizer import ByteBPE, train_bpe
from ..train import LiveCurve, train_gpt
from .prose import prose

__all__ = [
    "LANGS",
    "SEPARATOR",
    "ProseRecipe",
    "PROSE_RECIPE",
    "LONG_RECIPE",
    "training_text",
    "prose_tokenizer",
    "ProseData",
    "VALIDATION",
    "validation_split",
    "validation_tokenizer",
    "prose_data",
    "ProseRun",
    "train_prose_model",
    "curve_windows",
    "window_bits_per_byte",
    "compressor_context",
    "held_out_bits_per_byte",
    "save_prose_run",
    "load_prose_run",
    "REFERENCE_FILES",
    "reference_prose_run",
    "partner_seed",
    "reference_partner",
    "CURVE_FILE",
    "reference_curve",
    "CODING",
    "STATIC_CODING",
    "PARTNER_SEED",
    "NGRAM",
    "ADAPTING_NGRAM",
    "CODING_FILE",
    "reference_coding",
]

LANGS = ("es", "en")
SEPARATOR = "\n\n"  # between paragraphs, and between the two languages' training text


@dataclass(frozen=True)
class ProseRecipe:
    """Tokenizer, model and training settings of notebook 12's language model."""

    vocab_size: int = 2000  # BPE tokens (256 bytes + merges)
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 344  # SwiGLU's hidden width, ≈ 8/3 · d_model
    context: int = 64  # tokens per training window (and the model's max_len)
    batch_size: int = 16
    steps: int = 500
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    dropout: float = 0.0  # on attention weights and block outputs, in training
    eval_every: int = 50  # steps between two measurements of the training and held-out loss
    eval_windows: int = 64  # windows of ``context`` tokens per language in each measurement

    def config(self) -> ModernConfig:
        return ModernConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_layers=self.n_layers,
            d_ff=self.d_ff,
            max_len=self.context,
            dropout=self.dropout,
        )


PROSE_RECIPE = ProseRecipe()
# The longer run: the same recipe with its schedule stretched over more steps (tools/prose_runs.py).
LONG_RECIPE = dataclasses.replace(PROSE_RECIPE, steps=4000, warmup=100, eval_every=250)

# How notebook 12 compresses with its model, chosen on training text only by ``tools/prose_runs.py --choose`` (the
# scores it chose from are stored in prose_coding.json): the sliding window of the model's context moved by half of
# it; after each window, one step of plain gradient descent with rate 0.03 on every parameter.
CODING = CodingSettings(context=PROSE_RECIPE.context, stride=PROSE_RECIPE.context // 2, lr=0.03)
STATIC_CODING = dataclasses.replace(CODING, lr=0.0)  # the same windows, the model left as it is
PARTNER_SEED = 2  # the stored model mixed with the live one; with a live model of this seed, the stored seed 0's
NGRAM = (8, 0.9)  # the byte n-gram's order and discount, chosen on training text (tools/prose_runs.py --choose)
ADAPTING_NGRAM = (8, 0.9)  # the same choice for the n-gram that keeps counting as it reads


def training_text(lang: str | None = None) -> str:
    """The text the tokenizer and the model learn from: the training prose of ``lang``, or of both languages
    (Spanish, then English) when ``lang`` is None."""
    if lang is not None:
        return prose(lang, "train")
    return SEPARATOR.join(prose(lang, "train") for lang in LANGS)


@functools.lru_cache(maxsize=4)
def prose_tokenizer(vocab_size: int = PROSE_RECIPE.vocab_size) -> ByteBPE:
    """The byte-level BPE of ``vocab_size`` tokens trained on both languages' training text (deterministic)."""
    return train_bpe(training_text(), vocab_size)


@dataclass
class ProseData:
    """The corpus as token ids: the training text of both languages, and each language's held-out text.

    ``held_ids[lang]`` are the ids of ``SEPARATOR + held_text[lang]``: the first ``start`` ids (the
    separator's) are context only, so that the text's first token is predicted like every other.
    """

    tokenizer: ByteBPE
    train_ids: torch.Tensor  # (N,)
    held_text: dict[str, str]
    held_ids: dict[str, torch.Tensor]  # lang -> (M,)
    start: int  # the separator's ids at the start of held_ids

    def held_bytes(self, lang: str) -> int:
        """The UTF-8 bytes of ``lang``'s held-out text: what a bits-per-byte measure divides by."""
        return len(self.held_text[lang].encode("utf-8"))


VALIDATION = 0.1  # the share of each language's training text on which the coding settings are chosen


def validation_split(lang: str) -> tuple[str, str]:
    """``lang``'s training text cut in two at the paragraph break nearest before nine tenths of it: the part a
    model is trained on while settings are chosen, and the part they are chosen on (never the held-out text)."""
    text = training_text(lang)
    cut = text.rfind(SEPARATOR, 0, round(len(text) * (1 - VALIDATION)))
    return text[:cut], text[cut + len(SEPARATOR) :]


@functools.lru_cache(maxsize=2)
def validation_tokenizer(vocab_size: int = PROSE_RECIPE.vocab_size) -> ByteBPE:
    """The byte-level BPE of ``vocab_size`` tokens trained on the first nine tenths of both languages' training text
    (:func:`validation_split`): the tokenizer of the split on which settings are chosen, which has not seen the
    tenth they are chosen on (the recipe's tokenizer, trained on the whole training text, has)."""
    return train_bpe(SEPARATOR.join(validation_split(lang)[0] for lang in LANGS), vocab_size)


def prose_data(recipe: ProseRecipe = PROSE_RECIPE, validation: bool = False) -> ProseData:
    """The corpus as token ids. With ``validation=True``, the split on which settings are chosen: the first nine
    tenths of each language's training text to train on, the last tenth as the "held-out" text
    (:func:`validation_split`), and a tokenizer trained on those nine tenths only (:func:`validation_tokenizer`), so
    that nothing of the split has seen its last tenth; otherwise the recipe's tokenizer."""
    tokenizer = validation_tokenizer(recipe.vocab_size) if validation else prose_tokenizer(recipe.vocab_size)
    separator = torch.tensor(tokenizer.encode(SEPARATOR))
    start = len(separator)
    if validation:
        parts = {lang: validation_split(lang) for lang in LANGS}
        train = SEPARATOR.join(parts[lang][0] for lang in LANGS)
        held_text = {lang: parts[lang][1] for lang in LANGS}
    else:
        train = training_text()
        held_text = {lang: prose(lang, "test") for lang in LANGS}
    held_ids = {lang: torch.tensor(tokenizer.encode(SEPARATOR + text)) for lang, text in held_text.items()}
    if any(not torch.equal(ids[:start], separator) for ids in held_ids.values()):  # pragma: no cover
        raise error("el separador se fundió con el texto", "the separator merged with the text")
    return ProseData(tokenizer, torch.tensor(tokenizer.encode(train)), held_text, held_ids, start)


def _windows(ids: torch.Tensor, length: int, count: int) -> torch.Tensor:
    """``count`` windows of ``length`` ids spread evenly over ``ids`` (fixed, no randomness). (count, length)."""
    if len(ids) < length:
        raise error(
            f"el texto tiene {len(ids)} tokens, menos que una ventana de {length}",
            f"the text has {len(ids)} tokens, fewer than one window of {length}",
        )
    starts = torch.linspace(0, len(ids) - length, count).round().long().unique()
    return torch.stack([ids[s : s + length] for s in starts.tolist()])


def curve_windows(data: ProseData, recipe: ProseRecipe = PROSE_RECIPE) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed windows the training curve is measured on: ``recipe.eval_windows`` windows of ``recipe.context``
    tokens spread over the training text, and as many over each language's held-out text (Spanish first).
    Shapes: (W, T) and (2W, T)."""
    T = recipe.context
    held = torch.cat([_windows(data.held_ids[lang], T, recipe.eval_windows) for lang in LANGS])
    return _windows(data.train_ids, T, recipe.eval_windows), held


@torch.no_grad()
def window_bits_per_byte(model: ModernTransformer, windows: torch.Tensor, tokenizer: ByteBPE) -> float:
    """Bits per byte of predicting every token of each window but the first from the ones before it, in one
    batch: the nats of those tokens over ln 2 and the bytes they decode to. Windows (B, T)."""
    device = next(model.parameters()).device
    windows = windows.to(device)
    with eval_mode(model):
        logp = model(windows).float().log_softmax(-1)  # (B, T, V)
    nats = -logp[:, :-1].gather(-1, windows[:, 1:, None]).sum().item()
    n_bytes = sum(len(tokenizer.vocab[i]) for i in windows[:, 1:].flatten().tolist())
    return bits_per_byte(nats, n_bytes)


def compressor_context(lang: str) -> bytes:
    """What a compressor is given before ``lang``'s held-out text: both languages' training text, ``lang``'s last
    (gzip remembers only the last 32 KB), each followed by :data:`SEPARATOR`, as UTF-8."""
    other = [other for other in LANGS if other != lang]
    return "".join(training_text(part) + SEPARATOR for part in [*other, lang]).encode("utf-8")


def held_out_bits_per_byte(model: ModernTransformer | Sequence[ModernTransformer], data: ProseData, lang: str) -> float:
    """The model's bits per byte on ``lang``'s whole held-out text: a sliding window of the model's context moved by
    half of it, every token predicted once, the first one after :data:`SEPARATOR`. Several models (of one context):
    their probabilities mixed with equal weights, the ideal size of their static file (:func:`model_bits_per_byte`)."""
    T = (model if isinstance(model, ModernTransformer) else model[0]).config.max_len
    return model_bits_per_byte(
        model, data.held_ids[lang], data.held_bytes(lang), context=T, stride=T // 2, start=data.start
    )


@dataclass
class ProseRun:
    """A trained language model of the course's prose, its tokenizer and how its losses went.

    ``eval_step[i]`` is the step after which ``train_bpb[i]`` and ``held_bpb[i]`` were measured (bits per byte on
    fixed windows of the training text and of both languages' held-out text; step 0 is the untrained model);
    ``loss[s]`` is the training batch's loss of step s + 1, in nats per token.
    """

    model: ModernTransformer
    tokenizer: ByteBPE
    recipe: ProseRecipe
    seed: int
    loss: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    train_bpb: list[float] = field(default_factory=list)
    held_bpb: list[float] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the training
    meta: dict = field(default_factory=dict)


def train_prose_model(
    seed: int | None = None,
    recipe: ProseRecipe = PROSE_RECIPE,
    device: torch.device | str | None = None,
    progress: bool = True,
    live_plot: bool = False,
    on_eval: Callable[[int, ModernTransformer], None] | None = None,
    validation: bool = False,
    tie_output: bool = False,
) -> ProseRun:
    """Train notebook 12's language model from scratch under ``seed`` (default: the seed in force).

    Args:
        progress: show a progress bar.
        live_plot: in a notebook, redraw the training and held-out bits per byte at every measurement (one figure,
            kept at its last drawing).
        on_eval: called as ``on_eval(step, model)`` after every measurement (``tools/prose_runs.py`` measures the
            held-out text there with a sliding window); it must not draw random numbers.
        validation: train on the first nine tenths of each language's training text, and measure on the last
            tenths (:func:`prose_data`), as ``tools/prose_runs.py`` does to choose the coding settings.
        tie_output: one table for the input embeddings and the output layer (``tools/prose_runs.py`` measures it).

    Returns:
        the :class:`ProseRun`, its model in eval mode.
    """
    seed = current_seed() if seed is None else seed
    data = prose_data(recipe, validation)
    torch.manual_seed(seed)
    model = ModernTransformer(dataclasses.replace(recipe.config(), tie_output=True) if tie_output else recipe.config())
    if device is not None:
        model.to(device)
    generator = torch.Generator().manual_seed(seed)
    T, ids = recipe.context, data.train_ids
    train_windows, held_windows = curve_windows(data, recipe)
    run = ProseRun(model, data.tokenizer, recipe, seed)
    curve = LiveCurve(
        live_plot,
        {"train": say("entrenamiento", "training"), "held": say("texto reservado", "held-out text")},
        ylabel=say("bits por byte", "bits per byte"),
        steps=recipe.steps,
    )

    def measure(step: int, model: ModernTransformer) -> None:
        run.eval_step.append(step)
        run.train_bpb.append(window_bits_per_byte(model, train_windows, data.tokenizer))
        run.held_bpb.append(window_bits_per_byte(model, held_windows, data.tokenizer))
        curve.update(step, {"train": run.train_bpb[-1], "held": run.held_bpb[-1]})
        if on_eval is not None:
            on_eval(step, model)

    def next_batch() -> torch.Tensor:
        starts = torch.randint(0, len(ids) - T + 1, (recipe.batch_size,), generator=generator)
        return torch.stack([ids[s : s + T] for s in starts.tolist()])  # (B, T)

    def callback(step: int, model: ModernTransformer) -> None:
        if step % recipe.eval_every == 0 or step == recipe.steps:
            measure(step, model)

    measure(0, model)
    began = time.perf_counter()
    run.loss = train_gpt(
        model,
        next_batch,
        recipe.steps,
        lr=recipe.lr,
        warmup=recipe.warmup,
        weight_decay=recipe.weight_decay,
        clip_norm=recipe.clip_norm,
        device=device,
        progress=progress,
        callback=callback,
    )
    run.seconds = time.perf_counter() - began
    curve.finish()
    run.meta = {"seed": seed, "recipe": dataclasses.asdict(recipe)}
    if validation:
        run.meta["validation"] = True
    if tie_output:
        run.meta["tie_output"] = True
    run.model.eval()
    return run


# --- checkpoints ------------------------------------------------------------------------

FORMAT = "minitransformer-prose-lm-1"


def save_prose_run(path: str | os.PathLike, run: ProseRun, extra: dict | None = None) -> Path:
    """Write ``run`` (weights, tokenizer, recipe, losses) to ``path``; ``extra`` goes into its meta."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": FORMAT,
            "recipe": dataclasses.asdict(run.recipe),
            "state_dict": {k: v.detach().cpu() for k, v in run.model.state_dict().items()},
            "tokenizer": {
                "merges": [list(pair) + [new] for pair, new in run.tokenizer.merges],
                "vocab": list(run.tokenizer.vocab),
                "special_tokens": list(run.tokenizer.special_tokens),
            },
            "seed": run.seed,
            "loss": run.loss,
            "eval_step": run.eval_step,
            "train_bpb": run.train_bpb,
            "held_bpb": run.held_bpb,
            "seconds": run.seconds,
            "meta": {**run.meta, **(extra or {})},
        },
        path,
    )
    return path


def load_prose_run(path: str | os.PathLike, device: torch.device | str | None = None) -> ProseRun:
    """Read a run written by :func:`save_prose_run`; its model in eval mode on ``device`` (default: CPU)."""
    saved = torch.load(Path(path), map_location="cpu", weights_only=True)
    if saved.get("format") != FORMAT:
        raise error(
            f"{path} no es un modelo de la prosa del curso ({FORMAT})",
            f"{path} is not a model of the course's prose ({FORMAT})",
        )
    recipe = ProseRecipe(**saved["recipe"])
    model = ModernTransformer(recipe.config())
    model.load_state_dict(saved["state_dict"])
    if device is not None:
        model.to(device)
    t = saved["tokenizer"]
    tokenizer = ByteBPE(
        tuple(((a, b), new) for a, b, new in t["merges"]), tuple(t["vocab"]), tuple(t["special_tokens"])
    )
    return ProseRun(
        model.eval(),
        tokenizer,
        recipe,
        saved["seed"],
        saved["loss"],
        saved["eval_step"],
        saved["train_bpb"],
        saved["held_bpb"],
        saved["seconds"],
        saved["meta"],
    )


# The reference runs, trained under the stored outputs' numerics profile by tools/prose_runs.py: the recipe with
# seed 0 (notebook 12 trains the same live) and the longer run. Notebook 13 opens them.
REFERENCE_FILES = {"recipe": "prose_lm_seed0.pt", "long": "prose_lm_long.pt", "partner": "prose_lm_seed2.pt"}
CURVE_FILE = "prose_curve.json"
CODING_FILE = "prose_coding.json"


def reference_prose_run(which: str = "recipe", device: torch.device | str | None = None) -> ProseRun:
    """One of the stored runs: ``"recipe"`` (:data:`PROSE_RECIPE`, seed 0), ``"long"`` (:data:`LONG_RECIPE`) or
    ``"partner"`` (:data:`PROSE_RECIPE`, seed :data:`PARTNER_SEED`: the model notebook 12 mixes with its own)."""
    from importlib.resources import as_file, files

    if which not in REFERENCE_FILES:
        raise error(
            f"which debe ser uno de {tuple(REFERENCE_FILES)}, no {which!r}",
            f"which must be one of {tuple(REFERENCE_FILES)}, got {which!r}",
        )
    with as_file(files("minitransformer") / "reference_runs" / REFERENCE_FILES[which]) as path:
        return load_prose_run(path, device)


def partner_seed(seed: int | None = None) -> int:
    """The seed of the stored model mixed with a live model trained under ``seed`` (default: the seed in force):
    :data:`PARTNER_SEED`, or 0, the recipe's stored run, when the live model is itself of seed :data:`PARTNER_SEED`.
    Whatever the seed, a model is never mixed with itself."""
    seed = current_seed() if seed is None else seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise error(f"seed debe ser un entero, no {seed!r}", f"seed must be an integer, got {seed!r}")
    return 0 if seed == PARTNER_SEED else PARTNER_SEED


def reference_partner(seed: int | None = None, device: torch.device | str | None = None) -> ProseRun:
    """The stored run notebook 12 mixes with its live model of ``seed`` (default: the seed in force): the recipe
    with seed :func:`partner_seed`, another seed than the live model's."""
    return reference_prose_run("partner" if partner_seed(seed) == PARTNER_SEED else "recipe", device)


def reference_curve() -> dict:
    """The longer run's stored curve (``tools/prose_runs.py``): the command, the machine, and the held-out bits
    per byte of each language against steps and seconds, with the compressors' and the n-gram's."""
    import json
    from importlib.resources import files

    return json.loads((files("minitransformer") / "reference_runs" / CURVE_FILE).read_text(encoding="utf-8"))


def reference_coding() -> dict:
    """What ``tools/prose_runs.py`` measured for notebook 12's compression, each part with its command and machine:
    ``"choice"`` (the coding settings and the n-grams, chosen on training text), ``"seeds"`` (the held-out text
    compressed with models of several seeds), ``"variants"`` (the recipe changed one setting at a time) and ``"pair"``
    (the stored model of seed 0 and the partner coding both languages' held-out text)."""
    import json
    from importlib.resources import files

    return json.loads((files("minitransformer") / "reference_runs" / CODING_FILE).read_text(encoding="utf-8"))
