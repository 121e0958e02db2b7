import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, batch normalization and ReLU: a KernelBench Level-2-style fused operator
    (CPU-sized variant of l2_conv_bn_relu.py).
    The model is in training mode, as KernelBench builds it, so batch normalization uses the
    statistics of the batch (a reduction over the convolution's output)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


batch_size = 4
in_channels = 3
out_channels = 8
height = width = 8
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
