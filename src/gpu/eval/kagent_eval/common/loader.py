"""Loading KernelBench problems and candidates, and building the callables to compare.

Runs inside sandboxed children only (it executes the files it loads).
"""
import contextlib
import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def source_of(path_or_text):
    """(source text, path or None). A value naming an existing file is a path."""
    if "\n" not in path_or_text and os.path.isfile(path_or_text):
        with open(path_or_text) as f:
            return f.read(), os.path.abspath(path_or_text)
    return path_or_text, None


def load_module(name, path_or_text):
    """Import a problem or candidate; source text is written to a file so tracebacks
    and Triton (which reads the source of @jit functions) work. The file is a new one with an
    unpredictable name in the temporary folder, which in a sandboxed child is its private job
    folder (jail.enter)."""
    text, path = source_of(path_or_text)
    if path is None and "\n" not in text and text.strip().endswith(".py"):
        # a path that names no file here, not source text: say so instead of a SyntaxError
        raise FileNotFoundError("%s: no such file where the job runs (a path the sandbox does not "
                                "show?)" % text.strip())
    if path is None:
        fd, path = tempfile.mkstemp(prefix=name + "_", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(text)
    mod_name = "%s_%s" % (name, hashlib.sha1(path.encode()).hexdigest()[:8])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def torch_dtype(torch, name):
    return getattr(torch, DTYPES.get(name, name))


def cast_value(torch, value, dtype, device):
    """Floating tensors go to the job's dtype and the device; other values are kept."""
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(cast_value(torch, v, dtype, device) for v in value)
    return value


def device_scope(torch, device):
    """Create tensors directly on the device where torch allows it (>= 2.0): generating a
    multi-GB input on the CPU and copying it costs seconds per trial."""
    if device.startswith("cuda") and hasattr(torch, "set_default_device"):
        return torch.device(device)
    return contextlib.nullcontext()


def build_model(torch, cls, init_inputs, seed, dtype, device):
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.manual_seed_all(seed)
    with device_scope(torch, device):
        model = cls(*init_inputs)
    return model.to(device=device, dtype=dtype) if hasattr(model, "to") else model


def copy_matching_state(torch, ref_model, new_model):
    """Give ModelNew the reference weights wherever names and shapes agree, so both
    compute with the same weights even if ModelNew creates its layers in another order."""
    try:
        ref_state = ref_model.state_dict()
        new_state = new_model.state_dict()
    except AttributeError:
        return 0
    copied = 0
    with torch.no_grad():
        for key, value in new_state.items():
            src = ref_state.get(key)
            if src is not None and src.shape == value.shape:
                value.copy_(src)
                copied += 1
    return copied


def module_lookup(torch, model):
    """Name -> value for every parameter, buffer and plain attribute of the model and its
    submodules (leaf names; the first one found wins, outermost module first)."""
    table = {}
    modules = list(model.named_modules()) if hasattr(model, "named_modules") else [("", model)]
    for _, mod in modules:
        for name, value in vars(mod).items():
            if name.startswith("_") or name == "training":
                continue
            if isinstance(value, (int, float, bool, tuple, list, str)) or value is None:
                table.setdefault(name, value)
        for name, p in list(mod.named_parameters(recurse=False)) + list(
                mod.named_buffers(recurse=False)):
            table.setdefault(name, p)
    return table


# what KernelAgent's harness passes to kernel_function by keyword, taken from the reference
# model's layers (its benchmark.py binds the same names)
KA_PARAM_NAMES = ("weight", "bias", "kernel_size", "stride", "padding", "dilation",
                  "output_padding", "groups", "eps")


def ka_params(torch, model):
    """The first weight and bias tensors and the first of each layer setting found, outermost
    module first. A setting given per dimension is passed as one value when all its entries are
    equal, as KernelAgent passes it; unequal ones stay tuples (one value would be wrong)."""
    found = {}
    modules = list(model.named_modules()) if hasattr(model, "named_modules") else [("", model)]
    for _, mod in modules:
        for name in ("weight", "bias"):
            value = getattr(mod, name, None)
            if isinstance(value, torch.Tensor):
                found.setdefault(name, value)
        for name in KA_PARAM_NAMES[2:]:
            value = getattr(mod, name, None)
            if value is None or name in found:
                continue
            if isinstance(value, (tuple, list)) and value and all(v == value[0] for v in value):
                value = value[0]
            found[name] = value
    return found


class KernelFunctionModel:
    """Calls kernel_function(...) the way KernelAgent's harness does: the problem's inputs in
    order, the reference Model's parameters and settings by name (any attribute whose name a
    parameter has), and, for a signature with **kwargs, KernelAgent's parameter set as keywords
    (``ka_params``)."""

    def __init__(self, torch, fn, ref_model):
        self.fn = fn
        self.ka = ka_params(torch, ref_model)
        self.lookup = dict(module_lookup(torch, ref_model), **self.ka)
        self.signature = inspect.signature(fn)

    def bind(self, inputs):
        args, kwargs, pending = [], {}, list(inputs)
        takes_kwargs = False
        for p in self.signature.parameters.values():
            if p.kind == p.VAR_POSITIONAL:
                args.extend(pending)
                pending = []
            elif p.kind == p.VAR_KEYWORD:
                takes_kwargs = True
            elif p.name in self.lookup:
                kwargs[p.name] = self.lookup[p.name]
            elif pending:
                if p.kind == p.KEYWORD_ONLY or kwargs:
                    kwargs[p.name] = pending.pop(0)
                else:
                    args.append(pending.pop(0))
        if takes_kwargs:
            for name, value in self.ka.items():
                kwargs.setdefault(name, value)
        return args, kwargs

    def __call__(self, *inputs):
        args, kwargs = self.bind(inputs)
        return self.fn(*args, **kwargs)


def build_candidate(torch, module, ref_model, init_inputs, seed, dtype, device):
    """The candidate as a callable over the problem's inputs."""
    if hasattr(module, "ModelNew"):
        model = build_model(torch, module.ModelNew, init_inputs, seed, dtype, device)
        copy_matching_state(torch, ref_model, model)
        return model
    if callable(getattr(module, "kernel_function", None)):
        return KernelFunctionModel(torch, module.kernel_function, ref_model)
    raise LookupError("candidate defines neither ModelNew nor kernel_function (%s)" % defined_names(module))


def defined_names(module):
    """What a module defines itself (not what it imports), so an error can say what was found
    instead of what was wanted: "classes found: MyKernel; functions found: helper"."""
    classes, functions = [], []
    for name, value in sorted(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__ or name.startswith("__"):
            continue
        if inspect.isclass(value):
            classes.append(name)
        elif inspect.isfunction(value):
            functions.append(name)
    return "; ".join([
        "classes found: " + (", ".join(classes) or "none"),
        "functions found: " + (", ".join(functions) or "none")])
