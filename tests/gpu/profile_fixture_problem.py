"""Fixture problem for the profiler check: scale-and-shift then a row sum (two ops, so the
reference launches several kernels and the candidate two)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2.0 + 1.0
        return y, y.float().sum(dim=1)


def get_inputs():
    return [torch.rand(8192, 8192)]


def get_init_inputs():
    return []
