"""First Triton kernel for KernelBench #82: depthwise Conv2d on x [N, C, H, W].

Call: kernel_function(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=C).
`weight` is the module's [C_out, 1, KH, KW] tensor with C_out a multiple of C and
groups == C (depthwise, optionally with a channel multiplier); stride, padding and dilation
are ints or pairs (padding "valid" means 0).

One program computes a BLOCK_H x BLOCK_W output tile of one (n, c_out) plane; the KH*KW
taps are unrolled, each a shifted tile load that hits L1/L2 for all but the first tap,
times one scalar weight. fp32 accumulation.

Tunables: BLOCK_H, BLOCK_W, NUM_WARPS.
"""
import torch
import triton
import triton.language as tl

BLOCK_H = 16
BLOCK_W = 64
NUM_WARPS = 4


@triton.jit
def _depthwise_conv2d_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C_in, C_out, H, W, OH, OW,
                             MULT: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                             SH: tl.constexpr, SW: tl.constexpr,
                             PH: tl.constexpr, PW: tl.constexpr,
                             DH: tl.constexpr, DW: tl.constexpr, HAS_BIAS: tl.constexpr,
                             BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    pid_w = tl.program_id(0)
    pid_h = tl.program_id(1)
    plane = tl.program_id(2)  # n * C_out + co
    n = plane // C_out
    co = plane % C_out
    ci = co // MULT
    oh = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)[:, None]
    ow = pid_w * BLOCK_W + tl.arange(0, BLOCK_W)[None, :]
    out_mask = (oh < OH) & (ow < OW)
    x_base = x_ptr + (n.to(tl.int64) * C_in + ci) * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for kh in tl.static_range(KH):
        i_h = oh * SH - PH + kh * DH
        m_h = out_mask & (i_h >= 0) & (i_h < H)
        for kw in tl.static_range(KW):
            i_w = ow * SW - PW + kw * DW
            m = m_h & (i_w >= 0) & (i_w < W)
            xv = tl.load(x_base + i_h * W + i_w, mask=m, other=0.0)
            wv = tl.load(w_ptr + (co * KH + kh) * KW + kw)
            acc += xv.to(tl.float32) * wv.to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co).to(tl.float32)
    y_base = y_ptr + plane.to(tl.int64) * OH * OW
    tl.store(y_base + oh * OW + ow, acc.to(y_ptr.dtype.element_ty), mask=out_mask)


def _pair(v):
    if isinstance(v, (tuple, list)):
        assert len(v) == 2, "expects an int or a pair"
        return tuple(int(e) for e in v)
    return (int(v),) * 2


def kernel_function(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=None):
    assert x.is_cuda and x.dim() == 4, "expects x [N, C, H, W] on the GPU"
    N, C_in, H, W = x.shape
    C_out, w_in, KH, KW = weight.shape
    if groups is None:
        groups = C_in
    assert int(groups) == C_in and w_in == 1 and C_out % C_in == 0, "only depthwise convolution"
    if padding == "valid":
        padding = 0
    assert not isinstance(padding, str), "padding='same' is not supported"
    s, p, d = _pair(stride), _pair(padding), _pair(dilation)
    x = x.contiguous()
    weight = weight.contiguous()
    OH = (H + 2 * p[0] - d[0] * (KH - 1) - 1) // s[0] + 1
    OW = (W + 2 * p[1] - d[1] * (KW - 1) - 1) // s[1] + 1
    y = torch.empty((N, C_out, OH, OW), device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    has_bias = bias is not None
    grid = (triton.cdiv(OW, BLOCK_W), triton.cdiv(OH, BLOCK_H), N * C_out)
    _depthwise_conv2d_kernel[grid](
        x, weight, bias if has_bias else weight, y, C_in, C_out, H, W, OH, OW,
        MULT=C_out // C_in, KH=KH, KW=KW, SH=s[0], SW=s[1], PH=p[0], PW=p[1],
        DH=d[0], DW=d[1], HAS_BIAS=has_bias,
        BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W, num_warps=NUM_WARPS)
    return y
