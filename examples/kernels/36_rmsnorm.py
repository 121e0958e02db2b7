"""First Triton kernel for KernelBench #36: RMS normalisation over dim 1 of x [B, C, *spatial].

Call: kernel_function(x, num_features=None, eps=1e-5). `num_features`, if given, must equal
x.shape[1]; `eps` is the module's epsilon.

One program owns all C channels of BLOCK_S spatial positions of one batch item, so the
reduction over C stays in registers and x is read from memory once. Loads are contiguous
along the spatial axis. Statistics are computed in fp32.

Tunables: BLOCK_S, NUM_WARPS.
"""
import torch
import triton
import triton.language as tl

BLOCK_S = 128
NUM_WARPS = 8


@triton.jit
def _rmsnorm_dim1_kernel(x_ptr, y_ptr, C, S, eps,
                         BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    b = tl.program_id(1)
    offs_c = tl.arange(0, BLOCK_C)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    mask = (offs_c[:, None] < C) & (offs_s[None, :] < S)
    # B * C * S passes 2**31 for the showcase shape: the batch offset is int64.
    base = b.to(tl.int64) * C * S
    offs = base + offs_c[:, None] * S + offs_s[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / C
    rms = tl.sqrt(mean_sq + eps)
    y = x / rms[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel_function(x, num_features=None, eps=1e-5):
    assert x.is_cuda, "x must be on the GPU"
    assert x.dim() >= 2, "expects x [B, C, ...]"
    C = x.shape[1]
    if num_features is not None:
        assert int(num_features) == C, "num_features differs from x.shape[1]"
    x = x.contiguous()
    B = x.shape[0]
    S = x.numel() // (B * C) if x.numel() else 0
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    grid = (triton.cdiv(S, BLOCK_S), B)
    _rmsnorm_dim1_kernel[grid](x, y, C, S, float(eps),
                               BLOCK_C=triton.next_power_of_2(C), BLOCK_S=BLOCK_S,
                               num_warps=NUM_WARPS)
    return y
