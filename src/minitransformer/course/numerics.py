"""The numerics profile the notebooks' stored outputs are computed under, and its fingerprint.

Float results depend on which kernels run and how the work is split between threads. The stored
outputs are computed under one profile (:data:`PROFILE`, environment variables that a notebook
kernel inherits) that most x86-64 machines can reproduce bit for bit. Whether this machine does is
measured, not assumed: :func:`fingerprint` runs a fixed computation through the course's models
under the profile and hashes its bits, and the test command compares that hash with the one the
stored outputs were made with (kept beside them, in ``notebooks/numerics.json``). Where the two
differ, the notebooks still run and their assertions are checked, but the outputs that depend on
float numerics are not compared.

    python -m minitransformer.course.numerics      # this process's fingerprint, as JSON
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping

from ..i18n import tr

__all__ = [
    "PROFILE",
    "SEED",
    "profile_environ",
    "fingerprint",
    "measure",
    "differences",
    "differing_parts",
    "PARTS",
    "verdict",
    "user_language",
    "main",
]

# Environment variable -> value, each one there because changing it changes the stored numbers
# (measured: see CONTRIBUTING, "Numerics"). They are set only where not set already, so that a run
# under another profile (CI's second leg, a maintainer's experiment) stays possible.
PROFILE: dict[str, str] = {
    # The thread count splits matrix products and reductions differently (runtime.setup reads it).
    "MINITRANSFORMER_THREADS": "2",
    # PyTorch's own CPU kernels (softmax, exp, norms, reductions) come in vectorised variants; AVX2
    # is the widest one that nearly every x86-64 CPU of the last decade has. Ignored elsewhere.
    "ATEN_CPU_CAPABILITY": "avx2",
    # MKL, behind every float32 matrix product, picks its code path by CPU vendor and model. Of its
    # pinned paths, only COMPATIBLE (SSE2 without approximate instructions) is documented to give the
    # same bits on Intel and AMD processors; the others are honoured on Intel only.
    "MKL_CBWR": "COMPATIBLE",
    # oneDNN, behind a few PyTorch CPU operations (the exact GELU of the pretrained MiniLM among them),
    # uses the widest instructions it finds; AVX2 as for PyTorch's own kernels.
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
# The seed the notebooks' setup cell asks for (MINITRANSFORMER_SEED replaces it).
SEED = 0


def profile_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the profile's variables added where unset."""
    env = dict(os.environ if environ is None else environ)
    for name, value in PROFILE.items():
        env.setdefault(name, value)
    return env


# The parts of the fingerprint, in the order the computation meets them, with their names for a maintainer
# (Spanish, English): where two machines differ, the first part that differs says whose bits they are.
PARTS: dict[str, tuple[str, str]] = {
    "random": (
        "números aleatorios (lotes, pesos iniciales, máscaras de dropout)",
        "random numbers (batches, initial weights, dropout masks)",
    ),
    "matmul": ("productos de matrices (MKL)", "matrix products (MKL)"),
    "kernels": ("kernels de CPU de PyTorch (suma, softmax, exp)", "PyTorch's CPU kernels (sum, softmax, exp)"),
    "gelu": ("GELU exacta (oneDNN)", "exact GELU (oneDNN)"),
    "forward": ("pasada hacia delante de los modelos (GPT, moderno)", "the models' forward pass (GPT, modern)"),
    "loss": ("pérdida del primer paso de entrenamiento", "the first training step's loss"),
    "gradients": ("gradientes del primer paso (retropropagación)", "the first step's gradients (backward pass)"),
    "training": ("pesos tras tres pasos de Adam", "the weights after three Adam steps"),
}


def _computation() -> tuple[list, dict[str, list]]:
    """A fixed computation through the kernels the notebooks use: a translator trained for a few
    steps (matrix products, softmax, LayerNorm, ReLU, dropout, cross-entropy, Adam), a GPT (GELU,
    the fused attention kernel) and the modern model (RMSNorm, SwiGLU, RoPE), plus a reduction
    large enough to be split between threads and an exact GELU (oneDNN's).

    Returns the tensors the digest hashes, and the same computation's tensors by part (:data:`PARTS`),
    some of them seen on the way (the first step's loss and gradients, the dropout masks); looking at them
    draws no random number, so the digest is what it was before the parts existed."""
    import torch
    import torch.nn.functional as F

    from ..gpt import GPT, GPTConfig
    from ..model import Transformer, TransformerConfig
    from ..modern import ModernConfig, ModernTransformer
    from ..runtime import set_seed

    set_seed(int(os.environ.get("MINITRANSFORMER_SEED") or SEED))
    parts: dict[str, list] = {name: [] for name in PARTS}
    config = TransformerConfig(
        src_vocab_size=60, tgt_vocab_size=50, d_model=64, n_heads=4, d_ff=256, n_layers=2, dropout=0.1, max_len=64
    )
    model = Transformer(config)
    parts["random"] += [p.detach().clone() for p in model.parameters()]
    masks = [
        module.register_forward_hook(lambda _m, _i, out: parts["random"].append(out == 0))
        for module in model.modules()
        if isinstance(module, torch.nn.Dropout)
    ]
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        src = torch.randint(4, 60, (64, 12))
        tgt = torch.randint(4, 50, (64, 11))
        parts["random"] += [src, tgt]
        logits = model(src, tgt[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, 50), tgt[:, 1:].reshape(-1), label_smoothing=0.1)
        optimiser.zero_grad()
        loss.backward()
        if step == 0:
            parts["loss"].append(loss.detach().clone())
            parts["gradients"] += [p.grad.clone() for p in model.parameters()]
        optimiser.step()
    for hook in masks:
        hook.remove()
    tokens = torch.randint(0, 50, (8, 40))
    with torch.no_grad():
        gpt = GPT(GPTConfig(vocab_size=50, max_len=64, d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0)).eval()
        modern = ModernTransformer(ModernConfig(vocab_size=50, max_len=64, d_model=64, n_heads=4, n_layers=2)).eval()
        forward = [gpt(tokens), modern(tokens)]
        big = torch.randn(256, 4096)
        parts["random"] += [tokens, big]
        kernels = [big.sum(), big.softmax(-1), big.exp().log1p().mean(0)]
        gelu, matmul = F.gelu(big), big @ big.T
    parts["training"] = [p.detach() for p in model.parameters()]
    parts["forward"], parts["kernels"], parts["gelu"], parts["matmul"] = forward, kernels, [gelu], [matmul]
    return parts["training"] + forward + kernels + [gelu, matmul], parts


def _hash(tensors) -> str:
    digest = hashlib.sha256()
    for t in tensors:
        digest.update(t.contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def fingerprint() -> dict:
    """This process's numerics: a hash of :func:`_computation`'s bits, a hash of each of its parts, and the
    settings that shape them. Run it in a process started with the profile's environment (:func:`measure` does)."""
    import torch

    from ..runtime import THREADS_ENV, default_device

    if os.environ.get(THREADS_ENV):  # as a notebook's setup cell does
        torch.set_num_threads(int(os.environ[THREADS_ENV]))
    tensors, parts = _computation()
    return {
        "digest": _hash(tensors),
        "torch": torch.__version__.split("+")[0],
        "machine": platform.machine(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "seed": int(os.environ.get("MINITRANSFORMER_SEED") or SEED),
        "device": default_device().type,
        "parts": {name: _hash(part) for name, part in parts.items()},
    }


def measure(environ: Mapping[str, str] | None = None) -> dict:
    """:func:`fingerprint` in a fresh Python process with ``environ`` under the profile, as a notebook
    kernel started by the test command would see it."""
    done = subprocess.run(
        [sys.executable, "-m", "minitransformer.course.numerics"],
        env=profile_environ(environ),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def differences(measured: Mapping, stored: Mapping) -> list[tuple[str, object, object]]:
    """The settings (then the digest) in which ``measured`` differs from ``stored``: (name, here, stored)."""
    keys = ["machine", "device", "torch", "capability", "threads", "seed"]
    found = [(k, measured.get(k), stored.get(k)) for k in keys if measured.get(k) != stored.get(k)]
    if not found and measured.get("digest") != stored.get("digest"):
        found.append(("digest", measured.get("digest"), stored.get("digest")))
    return found


def differing_parts(measured: Mapping, stored: Mapping) -> tuple[list[str], list[str]]:
    """The parts of :data:`PARTS` whose bits differ between two fingerprints, and those that agree (in the order
    the computation meets them); both empty where either fingerprint has no parts."""
    here, there = measured.get("parts") or {}, stored.get("parts") or {}
    named = [name for name in PARTS if name in here and name in there]
    return [n for n in named if here[n] != there[n]], [n for n in named if here[n] == there[n]]


_NAMES = {
    "machine": ("procesador", "processor"),
    "device": ("dispositivo", "device"),
    "torch": ("torch", "torch"),
    "capability": ("kernels de CPU", "CPU kernels"),
    "threads": ("hilos", "threads"),
    "seed": ("semilla", "seed"),
}


def user_language(environ: Mapping[str, str] | None = None) -> str:
    """The language of the person running a command: Spanish where the locale says so, else English."""
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"):
        if env.get(name):
            return "es" if env[name].lower().startswith("es") else "en"
    return "en"


def verdict(measured: Mapping, stored: Mapping, lang: str) -> str:
    """One line for the test command's user: whether this machine reproduces the stored outputs' profile."""
    diff = differences(measured, stored)
    if not diff:
        return tr(
            lang,
            f"Numérica: esta máquina reproduce el perfil de las salidas guardadas (huella {stored['digest']}); "
            "los cuadernos se comparan con ellas, bit a bit.",
            f"Numerics: this machine reproduces the stored outputs' profile (fingerprint {stored['digest']}); "
            "the notebooks are compared with them, bit for bit.",
        )
    if diff[0][0] == "digest":
        differ, _ = differing_parts(measured, stored)
        if differ:
            why = tr(
                lang,
                f"con los mismos ajustes, sus cuentas dan otros bits en: {'; '.join(PARTS[n][0] for n in differ)}",
                f"with the same settings, its arithmetic gives other bits in: {'; '.join(PARTS[n][1] for n in differ)}",
            )
        else:
            why = tr(
                lang,
                "con los mismos ajustes, sus cuentas dan otros bits (otra CPU u otra biblioteca matemática)",
                "with the same settings, its arithmetic gives other bits (another CPU or maths library)",
            )
    else:
        why = ", ".join(
            tr(lang, f"{_NAMES[k][0]}: {here} en vez de {there}", f"{_NAMES[k][1]}: {here} instead of {there}")
            for k, here, there in diff
        )
    return tr(
        lang,
        f"Numérica: esta máquina no reproduce el perfil de las salidas guardadas ({why}); los cuadernos se ejecutan "
        "y se comprueban sus `assert` y las salidas que no dependen de la numérica; las demás no se comparan.",
        f"Numerics: this machine does not reproduce the stored outputs' profile ({why}); the notebooks run, and their "
        "assertions and the outputs that do not depend on float numerics are checked; the others are not compared.",
    )


def main() -> None:
    """Print this process's :func:`fingerprint` as one line of JSON."""
    print(json.dumps(fingerprint()))


if __name__ == "__main__":
    main()
