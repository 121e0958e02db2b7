"""The op of KernelBench level 1 #12 (a diagonal matrix times a matrix, diag(A) @ B) at a size a
CPU handles in milliseconds: scripts/demo.sh's CPU problem. Eager builds the N x N diagonal matrix
and multiplies it in full (2 N*N*M flops, almost all of them products with zero); the same values
are each row of B times its entry of A (N*M multiplies): examples/kernels/cpu/diag_matmul_small.py."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


N = 256
M = 256


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
