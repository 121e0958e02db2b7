"""CPU-mode starting kernel for examples/problems/rmsnorm_small.py: the sum of squares walks the
channels CHUNK at a time. Correct but slow; CHUNK is a knob that agents/tune.lua can search, so
the main job has something to improve on a machine without a GPU or an LLM."""
import torch
import torch.nn as nn

CHUNK = 1


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        channels = x.shape[1]
        sum_sq = torch.zeros_like(x[:, :1])
        for c in range(0, channels, CHUNK):
            part = x[:, c:c + CHUNK]
            sum_sq = sum_sq + (part * part).sum(dim=1, keepdim=True)
        return x / torch.sqrt(sum_sq / channels + self.eps)
