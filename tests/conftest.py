"""Unit tests run on one CPU thread: small tensors gain nothing from more, and results do
not depend on the machine's core count. (Notebook kernels get their thread count from the
repository's top-level conftest.py.)"""

import torch

torch.set_num_threads(1)
