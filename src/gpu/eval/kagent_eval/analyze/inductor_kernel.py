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
from eager's by more than an fp32 tolerance). `max_autotune` true: max-autotune with the GEMM
backends ATen and Triton, so Inductor times cuBLAS/cuDNN beside its Triton templates and keeps the
faster (torch.compile(mode="max-autotune")'s choice of kernels, without its CUDA graphs). The file
is untrusted from here on: the evaluator verifies it as any candidate.
"""
import inspect
import re

from ..child import child_common, unleased_compile
from ..common import inputs, loader

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
    patches = compile_patches(spec)
    torch._dynamo.reset()
    # max-autotune times its candidate kernels while it compiles: that compile keeps the lease
    if times_kernels(spec):
        from torch._dynamo.backends.registry import lookup_backend
        be = lookup_backend("inductor")
    else:
        be = unleased_compile.backend(torch, ch, child_common.SHARED)
    graph_inputs = []
    with config.patch(patches), torch.no_grad():
        compiled = torch.compile(model, backend=recording(be, graph_inputs), fullgraph=True, dynamic=False)
        out, codes = run_and_get_code(compiled, *args)
    if not codes:
        return {"ok": False, "error": "EINDUCTOR: Inductor emitted no code for the subgraph"}
    n_out = len(out) if isinstance(out, (tuple, list)) else 1
    names = list(inspect.signature(problem.Model.forward).parameters)[1:]
    return standalone(codes[-1], len(args), n_out, torch.__version__, spec,
                      call_order(graph_inputs, names))


def compile_patches(spec):
    """The torch._inductor.config patches of a spec: no CUDA graphs, no freezing (parameters stay
    inputs of call); `library` deny: max-autotune, Triton templates only; `max_autotune`:
    max-autotune, ATen and Triton (deny wins where both are given); `layout` eager: no layout
    optimization."""
    patches = {"triton.cudagraphs": False, "freezing": False}
    if spec.get("library") == "deny":
        patches.update({"max_autotune": True, "max_autotune_gemm_backends": "TRITON"})
    elif spec.get("max_autotune"):
        patches.update({"max_autotune": True, "max_autotune_gemm_backends": "ATEN,TRITON"})
    if spec.get("layout") == "eager":
        patches["layout_optimization"] = False
    return patches


def times_kernels(spec):
    """Whether the spec's compile autotunes, timing candidate kernels on the GPU: then it keeps the
    worker's lease instead of giving it up while it compiles (unleased_compile.py)."""
    return compile_patches(spec).get("max_autotune") is True


def recording(backend, graph_inputs):
    """`backend` (a torch.compile backend), noting in graph_inputs the forward
    argument each input of the compiled graph is. TorchDynamo makes a graph input of an argument
    where the forward first uses it, so call(args) takes them in that order, not the signature's
    (a batch norm reads its running statistics before its weight): the likely cause of the size
    assertions KernelBench Level 3 #14's subgraphs failed when given them positionally."""
    def record(gm, example_inputs, **kwargs):
        graph_inputs[:] = [local_name(n) for n in gm.graph.nodes if n.op == "placeholder"]
        return backend(gm, example_inputs, **kwargs)
    return record


def local_name(node):
    """The forward's argument a graph input node stands for, from TorchDynamo's source of it
    (node.meta["grapharg"]): the local's name, the position k for item k of a traced `*args`,
    else None."""
    source = getattr((getattr(node, "meta", None) or {}).get("grapharg"), "source", None)
    name = getattr(source, "local_name", None)
    if isinstance(name, str):
        return name
    index = getattr(source, "index", None)
    if getattr(getattr(source, "base", None), "local_name", None) == "args" and isinstance(index, int):
        return index
    return None


def call_order(graph_inputs, names):
    """Positions among the forward's arguments `names` of the compiled graph's inputs, in the
    order call(args) takes them; None where one is not an argument, or one is taken twice (then
    the arguments are passed as they come, which fits a graph that uses them in order)."""
    pos = [g if isinstance(g, int) else (names.index(g) if g in names else None)
           for g in graph_inputs]
    if not pos or any(p is None or p >= len(names) for p in pos) or len(set(pos)) != len(pos):
        return None
    return pos


def standalone(code, n_args, n_out, torch_version, spec, order=None):
    """The kernel file of Inductor's emitted module `code` for a subgraph of n_args inputs and
    n_out outputs: the module without its benchmark harness, and a `kernel_function` that passes
    the inputs to `call` (in `order`, positions of the inputs, where given: call_order), each
    made contiguous where it is not (KernelBench Level 3 #38: the composed program's LSTM output,
    a transposed view, failed call()'s stride assertion)."""
    cut = _HARNESS.search(code)
    if cut:
        code = code[:cut.start()]
    if "def call(" not in code:
        return {"ok": False, "error": "EINDUCTOR: the emitted module has no call(args)"}
    names = ["x%d" % i for i in range(n_args)]
    tail = [
        "",
        "",
        "# Inductor compiled call() for the subgraph problem's inputs, which are contiguous, and",
        "# asserts their strides; inside a composed program an input may be a view with others",
        "# (a batch-first LSTM's output is a transposed one): it is given a contiguous copy",
        "def _dense(x):",
        "    return x.contiguous() if hasattr(x, 'is_contiguous') and not x.is_contiguous() else x",
        "",
        "",
        "def kernel_function(%s):" % ", ".join(names),
        "    outs = call([%s])" % ", ".join("_dense(%s)" % names[i] for i in (
            order if order is not None else range(n_args))),
        "    return outs[0]" if n_out == 1 else "    return tuple(outs[:%d])" % n_out,
        "",
    ]
    head = ("# First kernel (agents/flows/first_kernel.lua, inductor): the code TorchInductor %s emitted for\n"
            "# this subgraph, made standalone; library kernels %s%s.\n") % (
                torch_version, "allowed" if spec.get("library") != "deny" else "denied (Triton templates)",
                ("; eager's layouts kept" if spec.get("layout") == "eager" else "")
                + ("; max-autotune (ATen and Triton)" if spec.get("max_autotune") and spec.get("library") != "deny" else ""))
    return {"ok": True, "source": head + code.rstrip() + "\n" + "\n".join(tail),
            "extern_calls": len(re.findall(r"extern_kernels\.", code)),
            "triton_kernels": len(re.findall(r"async_compile\.triton\(", code))}
