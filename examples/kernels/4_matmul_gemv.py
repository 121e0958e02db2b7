"""First Triton kernel for KernelBench #4: A [M, K] @ B [K, 1] -> [M, 1].

Call: kernel_function(A, B). Takes no module parameters.

M = 2048 rows alone give too few programs to fill the GPU, so K is split too: each of
SPLIT_K programs per row block writes an fp32 partial sum, and a second kernel adds the
partials in a fixed order (deterministic, unlike atomics). Accumulation is fp32 whatever the
input dtype.

Tunables: BLOCK_M, BLOCK_K, SPLIT_K, NUM_WARPS, REDUCE_BLOCK.
"""
import torch
import triton
import triton.language as tl

BLOCK_M = 8
BLOCK_K = 512
SPLIT_K = 16
NUM_WARPS = 4
REDUCE_BLOCK = 256


@triton.jit
def _gemv_partial_kernel(a_ptr, b_ptr, part_ptr, M, K, stride_am, stride_ak, stride_bk,
                         k_per_split, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    k_start = pid_k * k_per_split
    k_end = tl.minimum(k_start + k_per_split, K)
    # Row offsets reach M * K > 2**31 elements: int64.
    a_rows = a_ptr + rows.to(tl.int64)[:, None] * stride_am
    # A 2-D accumulator keeps the loop free of cross-lane reductions; one reduction at the end.
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < k_end
        a = tl.load(a_rows + ks[None, :] * stride_ak,
                    mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        b = tl.load(b_ptr + ks * stride_bk, mask=k_mask, other=0.0)
        acc += a.to(tl.float32) * b.to(tl.float32)[None, :]
    partial = tl.sum(acc, axis=1)
    tl.store(part_ptr + pid_k * M + rows, partial, mask=row_mask)


@triton.jit
def _sum_partials_kernel(part_ptr, out_ptr, M, stride_om,
                         SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK + tl.arange(0, BLOCK)
    mask = rows < M
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(part_ptr + s * M + rows, mask=mask, other=0.0)
    tl.store(out_ptr + rows * stride_om, acc.to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(A, B):
    assert A.is_cuda and B.is_cuda, "tensors must be on the GPU"
    assert A.dim() == 2 and B.dim() == 2 and B.shape[1] == 1, "expects A [M, K] and B [K, 1]"
    M, K = A.shape
    assert B.shape[0] == K, "inner dimensions differ"
    out = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    # Round each split up to whole BLOCK_K steps so only the last split has a ragged tail.
    k_per_split = triton.cdiv(triton.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    splits = triton.cdiv(K, k_per_split)
    partials = torch.empty((splits, M), device=A.device, dtype=torch.float32)
    grid = (triton.cdiv(M, BLOCK_M), splits)
    _gemv_partial_kernel[grid](A, B, partials, M, K, A.stride(0), A.stride(1), B.stride(0),
                               k_per_split, BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K,
                               num_warps=NUM_WARPS)
    _sum_partials_kernel[(triton.cdiv(M, REDUCE_BLOCK),)](
        partials, out, M, out.stride(0), SPLIT_K=splits, BLOCK=REDUCE_BLOCK)
    return out
