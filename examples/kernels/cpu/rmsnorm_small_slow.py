"""CPU-mode candidate for rmsnorm_small that is correct but deliberately slow.

It walks batch items and channels in Python, issuing many tiny tensor ops, so end-to-end
tests of the agent loop have a parent that is clearly beatable (about 20x the plain version
on a CPU).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        channels = x.shape[1]
        out = torch.empty_like(x)
        for b in range(x.shape[0]):
            sum_sq = torch.zeros_like(x[b, 0])
            for c in range(channels):
                sum_sq = sum_sq + x[b, c] * x[b, c]
            rms = torch.sqrt(sum_sq / channels + self.eps)
            for c in range(channels):
                out[b, c] = x[b, c] / rms
        return out
