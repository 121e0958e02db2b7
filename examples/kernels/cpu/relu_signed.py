"""CPU-mode candidate for relu_signed (pure PyTorch). clamp_min keeps NaN, as torch.relu does."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp_min(0.0)
