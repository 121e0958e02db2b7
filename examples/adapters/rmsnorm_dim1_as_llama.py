"""Adapter for agents/integrate.lua --adapter: a kernel written for KernelBench Level 1 #36 (RMS
normalization over dim 1 of x [B, C, *], no weight) put in place of a Llama RMSNorm (over the last
dimension, then times its weight, as transformers' LlamaRMSNorm computes it).

The kernel is either examples/kernels/36_rmsnorm.py (`kernel_function(x, num_features, eps)`, GPU)
or a CPU-mode `ModelNew(num_features, eps)` written for examples/problems/rmsnorm_small.py. Each
row of the hidden states becomes one item of [rows, hidden, 1] (a view, no copy), so the kernel's
dim 1 is the hidden dimension; the weight is applied after it. That multiply is part of what the
in-model timing measures.
"""


def adapt(kernel, target):
    """kernel: the kernel file as a module; target: the RMSNorm submodule it replaces (its
    `weight` and `variance_epsilon` are read). Returns the callable that takes its place."""
    weight = target.weight
    eps = float(getattr(target, "variance_epsilon", getattr(target, "eps", 1e-6)))
    if callable(getattr(kernel, "kernel_function", None)):
        if hasattr(kernel, "BLOCK_S"):
            # one position per item here: the kernel's tile of positions (its BLOCK_S tunable)
            # would otherwise hold BLOCK_S x hidden values, past what a program can keep
            kernel.BLOCK_S = 2

        def norm(x):
            return kernel.kernel_function(x, None, eps)
    else:
        norm = kernel.ModelNew(weight.shape[0], eps).to(weight.device)

    def call(hidden):
        rows = hidden.reshape(-1, hidden.shape[-1], 1)
        return weight * norm(rows).reshape(hidden.shape)
    return call
