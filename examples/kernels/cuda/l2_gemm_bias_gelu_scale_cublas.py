"""GEMM by cuBLAS, then its own epilogue kernel (problem: examples/problems/
l2_gemm_bias_gelu_scale.py, fp32): y = gelu(x @ W^T + b) * scale, the GEMM through torch.matmul
(cuBLAS) and bias, exact GELU and scale in one CUDA C++ kernel of its own, in place on the GEMM's
output. Most of its GPU time is cuBLAS's: refused under the job's `library = "own"` (EFALLBACK),
accepted under "some" (an own kernel runs on every call) and "any", its own share shown in the
result's `own_share` and the GEMM kernel in `library_kernels` (src/gpu/eval/README.md)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void bias_gelu_scale_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                       float scale, long long n, int cols) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = y[i] + bias[i % cols];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)) * scale;
    }
}

torch::Tensor bias_gelu_scale_(torch::Tensor y, torch::Tensor bias, double scale) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32 && y.dim() == 2 && bias.numel() == y.size(1),
                "bias_gelu_scale_: expects a contiguous float32 CUDA [M, N] and a bias of N");
    auto bc = bias.contiguous();
    long long n = y.numel();
    if (n == 0) return y;
    const int threads = 256;
    long long want = (n + threads - 1) / threads;
    int blocks = (int)(want < 65535 ? want : 65535);
    bias_gelu_scale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bc.data_ptr<float>(), (float)scale, n, (int)y.size(1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""
CPP_SRC = "torch::Tensor bias_gelu_scale_(torch::Tensor y, torch::Tensor bias, double scale);"

epilogue_ext = load_inline(name="bias_gelu_scale_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                           functions=["bias_gelu_scale_"])


class ModelNew(nn.Module):
    """Same parameters, by name, as the problem's Model (the harness copies them over)."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)
        self.scale = scale

    def forward(self, x):
        y = torch.matmul(x, self.gemm.weight.t())  # cuBLAS
        return epilogue_ext.bias_gelu_scale_(y.contiguous(), self.bias, self.scale)
