import torch
import torch.nn as nn


class Model(nn.Module):
    """A small MLP, a KernelBench Level-3-style model (the CPU-sized variant of l3_mlp.py):
    hidden layers of one width with ReLU, then a linear head. The hidden layers after the first
    have one shape, so a decomposition into layer-sized subgraphs needs one kernel for all of them."""

    def __init__(self, input_size, hidden_size, num_hidden, output_size):
        super().__init__()
        layers = [nn.Linear(input_size, hidden_size), nn.ReLU()]
        for _ in range(num_hidden - 1):
            layers += [nn.Linear(hidden_size, hidden_size), nn.ReLU()]
        layers.append(nn.Linear(hidden_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


batch_size = 8
input_size = 32
hidden_size = 64
num_hidden = 3
output_size = 16


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_hidden, output_size]
