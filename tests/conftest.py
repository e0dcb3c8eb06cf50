"""Unit tests run on one CPU thread: small tensors gain nothing from more, and results do
not depend on the machine's core count. (Notebooks run in their own kernels, whose setup
cell fixes their thread count.)"""

import torch

torch.set_num_threads(1)
