"""`torch.utils.cpp_extension.load_inline` through the job's extension cache, in a candidate's
processes (the compile step, child_compile.py, and the candidate's own, child_candidate.py).

KernelBench's candidates compile C++/CUDA with load_inline at their module's top level. Torch's
own cache is one folder per extension *name* (`TORCH_EXTENSIONS_DIR/<name>`): two candidates that
both call theirs "elementwise_add" rebuild over each other, and torch 1.x rewrites the sources on
every call, so even the same source recompiles (15 s for one C++ function here, 40-280 s of nvcc
on a GPU host). So each call builds in a folder of its own:

    $TORCH_EXTENSIONS_DIR/<name>-<sha256 of the call's sources, functions and flags, torch's and
                                    CUDA's versions and TORCH_CUDA_ARCH_LIST>/

and a folder whose build finished (MARKER, written after the module loaded) is imported as it is,
with no compiler and no ninja: under a second. TORCH_EXTENSIONS_DIR lies in the job's cache entry
(jail.enter), which belongs to the job's sources (candidate_cache.py): only a job of the same
problem and candidate writes there, so no candidate can plant a module for another's source.

A build that fails raises CompileError with the log cut to its errors (compiler_errors.py).
"""
import hashlib
import inspect
import os
import re
import time

from . import compiler_errors

MARKER = "kagent-built"  # in a build folder: the module's name, once it built and loaded
STAGE = "compile_source"  # the stage a build announces (child_compile.py; its own timeout)
KEYED = ("cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
         "extra_ldflags", "extra_include_paths", "with_cuda", "with_pytorch_error_handling")


class CompileError(Exception):
    """A load_inline build failed; the message is the cut log."""


def entry_key(torch, name, call):
    """The build folder's hash: what decides the module built (call: load_inline's arguments)."""
    h = hashlib.sha256()
    for part in [name, torch.__version__, str(getattr(torch.version, "cuda", None)),
                 os.environ.get("TORCH_CUDA_ARCH_LIST", "")] + [repr(call.get(k)) for k in KEYED]:
        data = part.encode()
        h.update(b"%d:" % len(data) + data)
    return h.hexdigest()


def folder(torch, name, call):
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))[:64]
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.getcwd(), "torch_extensions")
    return os.path.join(root, "%s-%s" % (safe, entry_key(torch, name, call)[:32]))


def install(torch, builds, announce=None):
    """Replaces cpp_extension.load_inline for this process. builds: a list that gets, per call,
    {name, cached, s} (and `error`, the cut log, for a build that failed). announce(stage) (or
    None): called with STAGE before a build that compiles, returning the stage it interrupted,
    and with that stage after it, so the build has the compile's timeout."""
    from torch.utils import cpp_extension
    original = cpp_extension.load_inline
    if getattr(original, "kagent_cached", False):
        return

    signature = inspect.signature(original)

    def load_inline(*args, **kwargs):
        try:
            call = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return original(*args, **kwargs)  # torch's own error for a call it would refuse
        name = call.pop("name")
        if call.get("build_directory") or call.get("is_python_module") is False \
                or call.get("is_standalone"):
            return original(*args, **kwargs)
        where = folder(torch, name, call)
        t0 = time.perf_counter()
        built = _built(where)
        if built:
            module = cpp_extension._import_module_from_library(built, where, True)
            builds.append({"name": name, "cached": True, "s": time.perf_counter() - t0})
            return module
        os.makedirs(where, exist_ok=True)
        resume = announce(STAGE) if announce else None
        try:
            module = original(name=name, **dict(call, build_directory=where))
        except RuntimeError as e:
            if "Error building extension" not in str(e):
                raise
            text = compiler_errors.cut(str(e))
            # recorded before it is raised: a candidate that catches it still failed its build
            builds.append({"name": name, "cached": False, "s": time.perf_counter() - t0,
                           "error": text})
            raise CompileError(text) from None
        finally:
            if announce and resume:
                announce(resume)
        with open(os.path.join(where, MARKER), "w") as f:
            f.write(module.__name__)
        builds.append({"name": name, "cached": False, "s": time.perf_counter() - t0})
        return module

    load_inline.kagent_cached = True
    cpp_extension.load_inline = load_inline


def _built(where):
    """The module's name where the folder holds a finished build, else None."""
    try:
        with open(os.path.join(where, MARKER)) as f:
            name = f.read().strip()
    except OSError:
        return None
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else None


# the words by which a candidate's source is taken to build an extension; the worker's ready line
# carries them (worker/ready_fields.py), so the pool's wall limit reads the same rule
MARKERS = ("load_inline", "cpp_extension")


def uses_load_inline(source):
    """Whether a candidate's source builds an extension (and so gets the compile step)."""
    return any(m in source for m in MARKERS)
