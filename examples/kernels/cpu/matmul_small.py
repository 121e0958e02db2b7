"""CPU-mode candidate for matmul_small (pure PyTorch).

A CPU has no custom-kernel path here, so the product is a blocked loop over K of torch.mm
calls: correct, and a different program from the reference for the loop to work on.
"""
import torch
import torch.nn as nn

BLOCK_K = 128


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k0 in range(0, A.shape[1], BLOCK_K):
            out.addmm_(A[:, k0:k0 + BLOCK_K], B[k0:k0 + BLOCK_K])
        return out
