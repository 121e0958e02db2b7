"""KernelBench L1 #43: 3-D max pooling with padding and dilation."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride,
                                    padding=padding, dilation=dilation)

    def forward(self, x):
        return self.maxpool(x)


batch_size = 16
channels = 32
dim1 = 128
dim2 = 128
dim3 = 128
kernel_size = 3
stride = 2
padding = 1
dilation = 3


def get_inputs():
    return [torch.rand(batch_size, channels, dim1, dim2, dim3)]


def get_init_inputs():
    return [kernel_size, stride, padding, dilation]
