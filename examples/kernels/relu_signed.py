"""First Triton kernel for the relu_signed example: elementwise ReLU.

Call: kernel_function(x). Takes no module parameters. NaN stays NaN, as in torch.relu.

Tunables: BLOCK, NUM_WARPS.
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
NUM_WARPS = 4


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # Testing x < 0 (not x > 0) lets NaN through unchanged.
    y = tl.where(x < 0, tl.zeros_like(x), x)
    tl.store(y_ptr + offs, y, mask=mask)


def kernel_function(x):
    assert x.is_cuda, "x must be on the GPU"
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n:
        _relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
