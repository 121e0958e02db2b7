"""First Triton kernel for KernelBench #43: MaxPool3d on x [N, C, D, H, W].

Call: kernel_function(x, kernel_size=3, stride=None, padding=0, dilation=1,
ceil_mode=False, return_indices=False). Each of kernel_size, stride, padding, dilation is an
int or a 3-tuple (stride None means kernel_size, as in nn.MaxPool3d). ceil_mode and
return_indices are not supported and must be False.

One program computes BLOCK consecutive outputs of one (n, c) plane; the window shape,
stride, padding and dilation are compile-time constants so the 27-tap loop is fully
unrolled. Padding reads as -inf, as in PyTorch.

Tunables: BLOCK, NUM_WARPS.
"""
import torch
import triton
import triton.language as tl

BLOCK = 512
NUM_WARPS = 4


@triton.jit
def _maxpool3d_kernel(x_ptr, y_ptr, D, H, W, OD, OH, OW,
                      KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                      SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                      PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                      DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                      BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    plane = tl.program_id(1)
    n_out = OD * OH * OW
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    od = t // OH
    x_base = x_ptr + plane.to(tl.int64) * D * H * W
    acc = tl.full((BLOCK,), float("-inf"), tl.float32)
    for kd in tl.static_range(KD):
        i_d = od * SD - PD + kd * DD
        m_d = mask & (i_d >= 0) & (i_d < D)
        for kh in tl.static_range(KH):
            i_h = oh * SH - PH + kh * DH
            m_h = m_d & (i_h >= 0) & (i_h < H)
            for kw in tl.static_range(KW):
                i_w = ow * SW - PW + kw * DW
                m = m_h & (i_w >= 0) & (i_w < W)
                v = tl.load(x_base + (i_d * H + i_h) * W + i_w, mask=m, other=float("-inf"))
                acc = tl.maximum(acc, v.to(tl.float32))
    y_base = y_ptr + plane.to(tl.int64) * n_out
    tl.store(y_base + offs, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _triple(v):
    if isinstance(v, (tuple, list)):
        assert len(v) == 3, "expects an int or a 3-tuple"
        return tuple(int(e) for e in v)
    return (int(v),) * 3


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def kernel_function(x, kernel_size=3, stride=None, padding=0, dilation=1,
                    ceil_mode=False, return_indices=False):
    assert x.is_cuda and x.dim() == 5, "expects x [N, C, D, H, W] on the GPU"
    assert not ceil_mode and not return_indices, "ceil_mode and return_indices are not supported"
    k = _triple(kernel_size)
    s = _triple(kernel_size if stride is None else stride)
    p = _triple(padding)
    d = _triple(dilation)
    x = x.contiguous()
    N, C, D, H, W = x.shape
    OD, OH, OW = (_out_size(n, *a) for n, a in zip((D, H, W), zip(k, s, p, d)))
    y = torch.empty((N, C, OD, OH, OW), device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    grid = (triton.cdiv(OD * OH * OW, BLOCK), N * C)
    _maxpool3d_kernel[grid](x, y, D, H, W, OD, OH, OW,
                            KD=k[0], KH=k[1], KW=k[2], SD=s[0], SH=s[1], SW=s[2],
                            PD=p[0], PH=p[1], PW=p[2], DD=d[0], DH=d[1], DW=d[2],
                            BLOCK=BLOCK, num_warps=NUM_WARPS)
    return y
