"""Train the course's reference number translator and store it inside the package.

    python tools/make_reference.py

It trains under the stored outputs' numerics profile (``minitransformer.course.numerics.PROFILE``; the
script restarts itself under it, since those settings act from a process's start). Run it after
any change to the model, its initialisation, the task or NUMBER_RECIPE; then re-execute notebooks
07 and 08. The file holds the final weights (lowest validation loss) and the snapshots after
REFERENCE_SNAPSHOTS steps.
"""

import os
import subprocess
import sys
from pathlib import Path

import torch

from minitransformer.course.numerics import PROFILE
from minitransformer.course.translator import (
    REFERENCE_FILE,
    REFERENCE_SNAPSHOTS,
    save_checkpoint,
    train_number_translator,
)
from minitransformer.runtime import THREADS_ENV

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    if any(os.environ.get(name) != value for name, value in PROFILE.items()):
        sys.exit(subprocess.call([sys.executable, __file__], env={**os.environ, **PROFILE}))
    torch.set_num_threads(int(PROFILE[THREADS_ENV]))
    trained = train_number_translator(seed=0, device="cpu", snapshot_steps=REFERENCE_SNAPSHOTS)
    path = save_checkpoint(ROOT / "src" / "minitransformer" / "reference_runs" / REFERENCE_FILE, trained)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1e6:.1f} MB)")
