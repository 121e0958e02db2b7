"""Softmax over each row, as a KernelBench CUDA candidate (problem: examples/problems/softmax.py,
fp32): one block per row, three passes over it (max, sum of exponentials, write), each
reduction a warp shuffle then one warp over the warps' partials."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int THREADS = 256;

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// every thread gets the block's result; `red` is free again when it returns
template <bool IS_MAX>
__device__ float block_reduce(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < THREADS / 32 ? red[lane] : (IS_MAX ? -INFINITY : 0.0f);
        w = IS_MAX ? warp_max(w) : warp_sum(w);
        if (lane == 0) red[0] = w;
    }
    __syncthreads();
    float out = red[0];
    __syncthreads();
    return out;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[32];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
    m = block_reduce<true>(m, red);
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += expf(row[c] - m);
    s = block_reduce<false>(s, red);
    float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = expf(row[c] - m) * inv;
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "softmax_forward: expects a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int rows = (int)xc.size(0), cols = (int)xc.size(1);
    if (rows == 0 || cols == 0) return y;
    softmax_rows_kernel<<<rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(name="softmax_rows_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                          functions=["softmax_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softmax_ext.softmax_forward(x)
