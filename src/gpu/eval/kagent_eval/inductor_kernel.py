"""The `inductor` kind of the `analyze` op: a subgraph problem (agents/lib/subproblem.lua, a Model
without parameters) compiled by TorchInductor on the worker's GPU, and the code Inductor emitted
for it made a standalone kernel file: the module Inductor wrote (its Triton kernels, compiled
when the file is imported, and its `call`), minus its benchmark harness, plus a
`kernel_function` that passes the subgraph's inputs to `call`.

`library` "allow": Inductor's defaults (GEMMs and convolutions may call cuBLAS/cuDNN through
`extern_kernels`); "deny": max-autotune with Triton templates only, so a GEMM becomes Triton
(a convolution Inductor has no Triton template for still calls the library, and the kernel audit
says so). `layout` "eager": Inductor's layout optimization off, so a library convolution gets its
inputs in the layouts eager gives it (by default Inductor may turn them channels-last, and cuDNN
then picks other algorithms, whose fp32 results, computed in TF32 by PyTorch's default, differ
from eager's by more than an fp32 tolerance). The file is untrusted from here on: the evaluator
verifies it as any candidate.
"""
import re

from . import child_common, inputs, loader, unleased_compile

_HARNESS = re.compile(r"^def benchmark_compiled_module\b|^if __name__ == ['\"]__main__['\"]", re.M)


def make(torch, ch, spec):
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    if not device.startswith("cuda"):
        return {"ok": False, "error": "ENOTSUP: Inductor's Triton code needs a GPU (CPU mode uses the reference ops)"}
    try:
        from torch._inductor import config
        from torch._inductor.utils import run_and_get_code
    except ImportError as e:
        return {"ok": False, "error": "ENOTSUP: no TorchInductor in this torch (%s)" % e}
    problem = loader.load_module("problem", spec["problem"])
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), spec["seed"], dtype, device)
    args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
    ch.stage("trace")
    patches = {"triton.cudagraphs": False, "freezing": False}
    if spec.get("library") == "deny":
        patches.update({"max_autotune": True, "max_autotune_gemm_backends": "TRITON"})
    if spec.get("layout") == "eager":
        patches["layout_optimization"] = False
    torch._dynamo.reset()
    # max-autotune times its candidate kernels while it compiles: that compile keeps the lease
    be = "inductor" if spec.get("library") == "deny" else unleased_compile.backend(torch, ch, child_common.SHARED)
    with config.patch(patches), torch.no_grad():
        compiled = torch.compile(model, backend=be, fullgraph=True, dynamic=False)
        out, codes = run_and_get_code(compiled, *args)
    if not codes:
        return {"ok": False, "error": "EINDUCTOR: Inductor emitted no code for the subgraph"}
    n_out = len(out) if isinstance(out, (tuple, list)) else 1
    return standalone(codes[-1], len(args), n_out, torch.__version__, spec)


def standalone(code, n_args, n_out, torch_version, spec):
    """The kernel file of Inductor's emitted module `code` for a subgraph of n_args inputs and
    n_out outputs: the module without its benchmark harness, and a `kernel_function` that passes
    the inputs to `call`."""
    cut = _HARNESS.search(code)
    if cut:
        code = code[:cut.start()]
    if "def call(" not in code:
        return {"ok": False, "error": "EINDUCTOR: the emitted module has no call(args)"}
    names = ["x%d" % i for i in range(n_args)]
    tail = [
        "",
        "",
        "def kernel_function(%s):" % ", ".join(names),
        "    outs = call([%s])" % ", ".join(names),
        "    return outs[0]" if n_out == 1 else "    return tuple(outs[:%d])" % n_out,
        "",
    ]
    head = ("# First kernel (agents/flows/first_kernel.lua, inductor): the code TorchInductor %s emitted for\n"
            "# this subgraph, made standalone; library kernels %s%s.\n") % (
                torch_version, "allowed" if spec.get("library") != "deny" else "denied (Triton templates)",
                "; eager's layouts kept" if spec.get("layout") == "eager" else "")
    return {"ok": True, "source": head + code.rstrip() + "\n" + "\n".join(tail),
            "extern_calls": len(re.findall(r"extern_kernels\.", code)),
            "triton_kernels": len(re.findall(r"async_compile\.triton\(", code))}
