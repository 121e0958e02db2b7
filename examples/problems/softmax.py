"""Softmax over a long row (dim 1)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 16384


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
