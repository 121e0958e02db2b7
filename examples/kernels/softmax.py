"""First Triton kernel for the softmax example: softmax over the last dim of x [R, C].

Call: kernel_function(x, dim=-1). Only the last dimension is supported (dim 1 of a 2-D x).

One program per row, three passes over the row in BLOCK chunks (row max, sum of exp,
normalised write), so any row length works; a 16384-wide row stays in L2 between passes.

Tunables: BLOCK, NUM_WARPS.
"""
import torch
import triton
import triton.language as tl

BLOCK = 2048
NUM_WARPS = 8


@triton.jit
def _softmax_rows_kernel(x_ptr, y_ptr, n_cols, stride_xr, stride_yr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xr
    y_row = y_ptr + row * stride_yr
    offs = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        run_max = tl.maximum(run_max, x)
    row_max = tl.max(run_max, axis=0)
    run_sum = tl.zeros((BLOCK,), tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        run_sum += tl.exp(x - row_max)
    inv_sum = 1.0 / tl.sum(run_sum, axis=0)
    for c0 in range(0, n_cols, BLOCK):
        cols = c0 + offs
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel_function(x, dim=-1):
    assert x.is_cuda and x.dim() == 2, "expects a 2-D x on the GPU"
    assert dim in (-1, 1), "only softmax over the last dimension is supported"
    x = x.contiguous()
    y = torch.empty_like(x)
    R, C = x.shape
    if y.numel():
        _softmax_rows_kernel[(R,)](x, y, C, x.stride(0), y.stride(0),
                                   BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
