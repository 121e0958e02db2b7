"""First Triton kernel for KernelBench #77: ConvTranspose3d on x [N, C_in, D, H, W].

Call: kernel_function(x, weight, bias=None, stride=1, padding=0, output_padding=0,
dilation=1, groups=1). `weight` is the module's [C_in, C_out, KD, KH, KW] tensor; stride,
padding, output_padding and dilation are ints or 3-tuples; only groups=1 is supported.

Gather form as an implicit GEMM: each output position looks back at the input positions
that scatter into it (i = (o + pad - k * dil) / stride, kept only where that division is
exact and in range). One program owns BLOCK_P output positions x BLOCK_CO output channels;
for each of the KD*KH*KW taps it gathers an x tile [BLOCK_P, BLOCK_CI] and multiplies it
with the weight tile [BLOCK_CI, BLOCK_CO] on the tensor cores (tl.dot, fp32 accumulation;
fp32 inputs use exact IEEE products so they meet fp32 tolerances).

This first version visits every tap for every output, including the outputs and taps
whose stride test fails (with stride 2 most of them): the obvious place to start optimising.

Tunables: BLOCK_P, BLOCK_CO, BLOCK_CI, NUM_WARPS, NUM_STAGES.
"""
import torch
import triton
import triton.language as tl

BLOCK_P = 64
BLOCK_CO = 64
BLOCK_CI = 32
NUM_WARPS = 4
NUM_STAGES = 2


@triton.jit
def _conv_transpose3d_kernel(x_ptr, w_ptr, b_ptr, y_ptr,
                             N, C_in, C_out, D, H, W, OD, OH, OW,
                             KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                             SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                             PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                             DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                             HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
                             BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                             BLOCK_CI: tl.constexpr):
    pid_p = tl.program_id(0)
    pid_co = tl.program_id(1)
    n_sp = OD * OH * OW
    offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)  # flattened (n, od, oh, ow)
    offs_co = pid_co * BLOCK_CO + tl.arange(0, BLOCK_CO)
    offs_ci = tl.arange(0, BLOCK_CI)
    p_mask = offs_p < N * n_sp
    co_mask = offs_co < C_out
    ow = offs_p % OW
    t = offs_p // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    n = t // OD
    in_sp = D * H * W
    x_n = n.to(tl.int64) * C_in * in_sp
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for kd in tl.static_range(KD):
        # Negative numerators are masked out before their quotient is used.
        t_d = od + PD - kd * DD
        i_d = t_d // SD
        v_d = p_mask & (t_d >= 0) & (t_d % SD == 0) & (i_d < D)
        for kh in tl.static_range(KH):
            t_h = oh + PH - kh * DH
            i_h = t_h // SH
            v_h = v_d & (t_h >= 0) & (t_h % SH == 0) & (i_h < H)
            for kw in tl.static_range(KW):
                t_w = ow + PW - kw * DW
                i_w = t_w // SW
                valid = v_h & (t_w >= 0) & (t_w % SW == 0) & (i_w < W)
                x_sp = x_n + (i_d * H + i_h) * W + i_w
                tap = (kd * KH + kh) * KW + kw
                for ci0 in range(0, C_in, BLOCK_CI):
                    ci = ci0 + offs_ci
                    ci_mask = ci < C_in
                    x_tile = tl.load(x_ptr + x_sp[:, None] + ci[None, :].to(tl.int64) * in_sp,
                                     mask=valid[:, None] & ci_mask[None, :], other=0.0)
                    w_offs = (ci[:, None] * C_out + offs_co[None, :]) * (KD * KH * KW) + tap
                    w_tile = tl.load(w_ptr + w_offs,
                                     mask=ci_mask[:, None] & co_mask[None, :], other=0.0)
                    if IEEE:
                        acc += tl.dot(x_tile, w_tile, input_precision="ieee")
                    else:
                        acc += tl.dot(x_tile, w_tile)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_co, mask=co_mask, other=0.0).to(tl.float32)[None, :]
    sp = offs_p % n_sp
    y_offs = (n.to(tl.int64) * C_out * n_sp + sp)[:, None] + offs_co[None, :].to(tl.int64) * n_sp
    tl.store(y_ptr + y_offs, acc.to(y_ptr.dtype.element_ty),
             mask=p_mask[:, None] & co_mask[None, :])


def _triple(v):
    if isinstance(v, (tuple, list)):
        assert len(v) == 3, "expects an int or a 3-tuple"
        return tuple(int(e) for e in v)
    return (int(v),) * 3


def kernel_function(x, weight, bias=None, stride=1, padding=0, output_padding=0,
                    dilation=1, groups=1):
    assert x.is_cuda and x.dim() == 5, "expects x [N, C_in, D, H, W] on the GPU"
    assert int(groups) == 1, "only groups=1 is supported"
    assert weight.dim() == 5 and weight.shape[0] == x.shape[1], "weight must be [C_in, C_out, k, k, k]"
    assert x.dtype == weight.dtype, "x and weight must share a dtype"
    s, p, op, d = _triple(stride), _triple(padding), _triple(output_padding), _triple(dilation)
    x = x.contiguous()
    weight = weight.contiguous()
    N, C_in, D, H, W = x.shape
    C_out, KD, KH, KW = weight.shape[1:]
    OD, OH, OW = ((i - 1) * si - 2 * pi + di * (k - 1) + oi + 1
                  for i, si, pi, di, k, oi in zip((D, H, W), s, p, d, (KD, KH, KW), op))
    y = torch.empty((N, C_out, OD, OH, OW), device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    has_bias = bias is not None
    grid = (triton.cdiv(N * OD * OH * OW, BLOCK_P), triton.cdiv(C_out, BLOCK_CO))
    _conv_transpose3d_kernel[grid](
        x, weight, bias if has_bias else weight, y,
        N, C_in, C_out, D, H, W, OD, OH, OW,
        KD=KD, KH=KH, KW=KW, SD=s[0], SH=s[1], SW=s[2], PD=p[0], PH=p[1], PW=p[2],
        DD=d[0], DH=d[1], DW=d[2], HAS_BIAS=has_bias, IEEE=(x.dtype == torch.float32),
        BLOCK_P=BLOCK_P, BLOCK_CO=BLOCK_CO, BLOCK_CI=BLOCK_CI,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return y
