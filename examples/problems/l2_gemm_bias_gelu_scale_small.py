import torch
import torch.nn as nn


class Model(nn.Module):
    """GEMM, bias, GELU and scaling: a KernelBench Level-2-style fused operator
    (CPU-sized variant of l2_gemm_bias_gelu_scale.py).
    y = gelu(x @ W^T + b) * scale"""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)
        self.scale = scale

    def forward(self, x):
        x = self.gemm(x)
        x = x + self.bias
        x = torch.nn.functional.gelu(x)
        return x * self.scale


batch_size = 16
in_features = 64
out_features = 32
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
