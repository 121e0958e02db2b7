"""ReLU as KernelBench's CUDA candidates are written: a ModelNew whose forward calls a CUDA C++
kernel built with torch.utils.cpp_extension.load_inline (problem: examples/problems/relu_signed.py,
fp32). Elementwise, a grid-stride loop, on the caller's current stream."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i];
        y[i] = (v > 0.0f || v != v) ? v : 0.0f;  // NaN stays NaN, as torch.relu's
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32,
                "relu_forward: expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long long n = xc.numel();
    if (n == 0) return y;
    const int threads = 256;
    long long want = (n + threads - 1) / threads;
    int blocks = (int)(want < 65535 ? want : 65535);
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CPP_SRC = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(name="relu_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                       functions=["relu_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_forward(x)
