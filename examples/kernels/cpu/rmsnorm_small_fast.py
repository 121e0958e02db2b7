"""CPU-mode candidate for rmsnorm_small, a little faster than the plain version.

Statistics are updated in place and one multiply by rsqrt replaces sqrt plus a full-size
divide. The gain is small (about 1.3x at [4, 16, 32, 32] with timeit, within noise of a
per-call timer): the plain formulation is already close to what pure PyTorch can do.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        inv_rms = (x * x).mean(dim=1, keepdim=True).add_(self.eps).rsqrt_()
        return x * inv_rms
