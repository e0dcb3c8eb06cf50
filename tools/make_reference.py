"""Train the course's reference number translator and store it inside the package.

    python tools/make_reference.py

Run it on the machine kind that stores the notebooks' outputs (2 threads, as the runners use),
after any change to the model, its initialisation, the task or NUMBER_RECIPE; then re-execute
notebooks 07 and 08. The file holds the final weights (lowest validation loss) and the
snapshots after REFERENCE_SNAPSHOTS steps.
"""

from pathlib import Path

import torch

from minitransformer.runtime import STORED_THREADS
from minitransformer.translator import REFERENCE_FILE, REFERENCE_SNAPSHOTS, save_checkpoint, train_number_translator

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    torch.set_num_threads(STORED_THREADS)
    trained = train_number_translator(seed=0, device="cpu", snapshot_steps=REFERENCE_SNAPSHOTS)
    path = save_checkpoint(ROOT / "src" / "minitransformer" / "reference_runs" / REFERENCE_FILE, trained)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size / 1e6:.1f} MB)")
