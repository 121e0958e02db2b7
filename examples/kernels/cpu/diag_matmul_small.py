"""CPU-mode kernel for examples/problems/diag_matmul_small.py (scripts/demo.sh's CPU start), pure
PyTorch: diag(A) @ B without the diagonal matrix. Row i of the output is A[i] * B[i], the very
products eager's matmul adds zeros to, so the values are the same, in N*M multiplies instead of
an N x N matrix built and multiplied in 2*N*N*M flops. The rows go ROWS at a time, one op per
block: ROWS is a knob agents/tune.lua raises (fewer, larger ops), so the LLM-free tuner has
something to improve as well. No result is cached: every call computes every element."""
import torch
import torch.nn as nn

ROWS = 16


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.empty_like(B)
        for r in range(0, B.shape[0], ROWS):
            torch.mul(A[r:r + ROWS, None], B[r:r + ROWS], out=out[r:r + ROWS])
        return out
