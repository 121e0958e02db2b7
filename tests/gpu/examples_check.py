#!/usr/bin/env python3
"""Checks the example Triton kernels (examples/kernels/) against their problems.

For each problem: build the reference Model after a fixed seed, cast model and inputs to the
dtype, call the kernel's kernel_function with the model's parameters bound by name, compare
(allclose plus relative L2 error), then time both with triton.testing.do_bench (median; it
flushes L2 between calls) and print a table.

Self-contained: needs python3, torch and triton only, not the kagent-rt runtime.

    python3 tests/gpu/examples_check.py                  # showcase (bf16) + small (bf16, fp32)
    python3 tests/gpu/examples_check.py --only 36_rmsnorm,softmax
    python3 tests/gpu/examples_check.py --only variants  # odd shapes and settings only
    python3 tests/gpu/examples_check.py --json out.json  # also write the rows as JSON
    python3 tests/gpu/examples_check.py --cpu            # CPU candidates (examples/kernels/cpu/)

Exit status: 0 all correct, 1 a check failed, 77 skipped (no CUDA; not with --cpu).
"""
import argparse
import gc
import importlib.util
import inspect
import json
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "examples" / "problems"
KERNELS = ROOT / "examples" / "kernels"

# (problem file stem, kernel file stem, dtypes). rmsnorm_small reuses the #36 kernel: the
# same code at a second, small shape and in fp32.
CASES = [
    ("4_matmul_gemv", "4_matmul_gemv", ("bf16",)),
    ("36_rmsnorm", "36_rmsnorm", ("bf16",)),
    ("43_maxpool3d", "43_maxpool3d", ("bf16",)),
    ("77_conv_transpose3d", "77_conv_transpose3d", ("bf16",)),
    ("82_depthwise_conv2d", "82_depthwise_conv2d", ("bf16",)),
    ("relu_signed", "relu_signed", ("bf16", "fp32")),
    ("softmax", "softmax", ("bf16", "fp32")),
    ("matmul_small", "matmul_small", ("bf16", "fp32")),
    ("rmsnorm_small", "36_rmsnorm", ("bf16", "fp32")),
]

# Module attributes a kernel_function may take by name; the first module (in modules()
# order, the top-level Model first) that has one supplies it.
PARAM_NAMES = ("weight", "bias", "stride", "padding", "output_padding", "dilation", "groups",
               "kernel_size", "eps", "num_features", "ceil_mode", "return_indices")

TOL = {"bf16": 1e-2, "fp16": 1e-2, "fp32": 1e-4}     # atol = rtol, as KernelBench
L2_TOL = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 1e-5}  # relative L2 error bound
SEED = 42


def variant_cases():
    """Showcase kernels at small, odd shapes and other module settings (bias, output_padding,
    channel multiplier, non-power-of-two channels), fp32: the generality their docstrings
    claim, which tuned or rewritten versions must keep."""
    import torch
    import torch.nn as nn

    class MatVec(nn.Module):
        def forward(self, A, B):
            return torch.matmul(A, B)

    class RMSNorm(nn.Module):
        def __init__(self, num_features, eps):
            super().__init__()
            self.num_features, self.eps = num_features, eps

        def forward(self, x):
            return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)

    r = torch.rand
    return [
        ("4_matmul_gemv", MatVec(), lambda: [r(37, 3000), r(3000, 1)]),
        ("36_rmsnorm", RMSNorm(5, 1e-3), lambda: [r(3, 5, 7, 9)]),
        ("43_maxpool3d", nn.MaxPool3d((2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0),
                                      dilation=(2, 1, 1)), lambda: [torch.randn(2, 3, 9, 10, 11)]),
        ("77_conv_transpose3d", nn.ConvTranspose3d(5, 7, (3, 2, 3), stride=(2, 1, 3),
                                                   padding=(1, 0, 2), output_padding=(1, 0, 1),
                                                   dilation=(2, 1, 1), bias=True),
         lambda: [torch.randn(2, 5, 4, 5, 6)]),
        ("82_depthwise_conv2d", nn.Conv2d(4, 8, 3, stride=2, padding=1, dilation=2, groups=4,
                                          bias=True), lambda: [torch.randn(2, 4, 17, 19)]),
    ]
CHUNK = 1 << 26  # elements per comparison chunk: keeps fp32 temporaries of huge outputs small


def load_module(path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bound_params(model):
    import torch
    found = {}
    for mod in model.modules():
        for name in PARAM_NAMES:
            if name in found or not hasattr(mod, name):
                continue
            value = getattr(mod, name)
            if callable(value) and not isinstance(value, torch.Tensor):
                continue
            found[name] = value
    return found


def call_with_params(fn, inputs, params):
    """Pass only the names fn declares (all of them if it takes **kwargs)."""
    sig = inspect.signature(fn)
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        kwargs = dict(params)
    else:
        kwargs = {k: v for k, v in params.items() if k in sig.parameters}
    return lambda: fn(*inputs, **kwargs)


def torch_dtype(name):
    import torch
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def make_inputs(problem, device, dtype):
    """The problem's own inputs, generated on the device when torch allows (much faster)."""
    import torch
    torch.manual_seed(SEED)
    if device.type == "cuda" and hasattr(torch.device, "__enter__"):
        with device:
            inputs = problem.get_inputs()
    else:
        inputs = problem.get_inputs()
    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor):
            t = t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
        out.append(t)
    return out


def compare(out, ref, dtype_name):
    """Chunked allclose and relative L2 over outputs too big for fp32 copies."""
    import torch
    tol = TOL[dtype_name]
    res = {"shape_ok": tuple(out.shape) == tuple(ref.shape), "dtype_ok": out.dtype == ref.dtype}
    if not res["shape_ok"]:
        res.update(ok=False, error="shape %s != %s" % (tuple(out.shape), tuple(ref.shape)))
        return res
    o, r = out.reshape(-1), ref.reshape(-1)
    max_abs, bad, diff_sq, ref_sq = 0.0, 0, 0.0, 0.0
    for i in range(0, o.numel(), CHUNK):
        oc, rc = o[i:i + CHUNK].float(), r[i:i + CHUNK].float()
        d = (oc - rc).abs_()
        max_abs = max(max_abs, float(d.max()))
        bad += int((d > tol + tol * rc.abs()).sum())
        diff_sq += float((d * d).sum(dtype=torch.float64))
        ref_sq += float((rc * rc).sum(dtype=torch.float64))
        del oc, rc, d
    rel_l2 = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else (0.0 if diff_sq == 0 else math.inf)
    finite = bool(torch.isfinite(out).all())
    res.update(max_abs_err=max_abs, mismatches=bad, rel_l2=rel_l2, finite=finite,
               ok=res["dtype_ok"] and finite and bad == 0 and rel_l2 <= L2_TOL[dtype_name])
    return res


def bench_ms(fn):
    import triton.testing
    q = triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8])
    return [float(v) for v in q]


def run_gpu_case(problem_stem, kernel_stem, dtype_name):
    import torch
    device = torch.device("cuda")
    dtype = torch_dtype(dtype_name)
    row = {"problem": problem_stem, "kernel": kernel_stem, "dtype": dtype_name}
    problem = load_module(PROBLEMS / (problem_stem + ".py"))
    kernel = load_module(KERNELS / (kernel_stem + ".py"))
    torch.manual_seed(SEED)
    model = problem.Model(*problem.get_init_inputs()).to(device=device, dtype=dtype).eval()
    inputs = make_inputs(problem, device, dtype)
    run_kernel = call_with_params(kernel.kernel_function, inputs, bound_params(model))
    with torch.no_grad():
        ref = model(*inputs)
        out = run_kernel()
        torch.cuda.synchronize()
        row.update(compare(out, ref, dtype_name))
        del out, ref
        torch.cuda.empty_cache()
        row["eager_ms"] = bench_ms(lambda: model(*inputs))
        row["triton_ms"] = bench_ms(run_kernel)
    row["speedup"] = row["eager_ms"][0] / row["triton_ms"][0]
    return row


def run_variant_case(kernel_stem, model, make):
    import torch
    device = torch.device("cuda")
    row = {"problem": "variant", "kernel": kernel_stem, "dtype": "fp32"}
    kernel = load_module(KERNELS / (kernel_stem + ".py"))
    model = model.to(device).eval()
    torch.manual_seed(SEED)
    inputs = [t.to(device) for t in make()]
    with torch.no_grad():
        out = call_with_params(kernel.kernel_function, inputs, bound_params(model))()
        # An fp64 reference: the true answer, whatever TF32 settings the backends use.
        ref = model.double()(*[t.double() for t in inputs]).float()
        row.update(compare(out, ref, "fp32"))
    return row


def run_cpu_case(path):
    """A CPU candidate (ModelNew) against its problem's Model, fp32, on the CPU."""
    import torch
    stem = path.stem
    problem_stem = stem
    for suffix in ("_slow", "_fast"):
        if stem.endswith(suffix):
            problem_stem = stem[: -len(suffix)]
    problem = load_module(PROBLEMS / (problem_stem + ".py"))
    cand = load_module(path)
    row = {"problem": problem_stem, "kernel": "cpu/" + stem, "dtype": "fp32"}
    init = problem.get_init_inputs()
    torch.manual_seed(SEED)
    model = problem.Model(*init)
    torch.manual_seed(SEED)
    new = cand.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    with torch.no_grad():
        for trial in range(3):
            torch.manual_seed(SEED + trial)
            inputs = problem.get_inputs()
            res = compare(new(*[t.clone() for t in inputs]), model(*inputs), "fp32")
            if not res["ok"]:
                break
        row.update(res)
        row["eager_ms"] = cpu_bench_ms(lambda: model(*inputs))
        row["triton_ms"] = cpu_bench_ms(lambda: new(*inputs))
    row["speedup"] = row["eager_ms"][0] / row["triton_ms"][0]
    return row


def cpu_bench_ms(fn, reps=30):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return [statistics.median(times), times[len(times) // 5], times[(4 * len(times)) // 5]]


def print_table(rows, cand_label):
    head = "%-22s %-24s %-5s %-4s %10s %10s %10s %10s %8s" % (
        "problem", "kernel", "dtype", "ok", "max_abs", "rel_l2", "eager_ms", cand_label, "speedup")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "eager_ms" not in r:
            if "error" not in r:  # a variant row: correctness only
                print("%-22s %-24s %-5s %-4s %10.3g %10.3g" % (
                    r["problem"], r["kernel"], r["dtype"], "yes" if r["ok"] else "NO",
                    r["max_abs_err"], r["rel_l2"]))
                continue
            print("%-22s %-24s %-5s FAIL %s" % (r["problem"], r["kernel"], r["dtype"],
                                               r["error"].splitlines()[-1][:80]))
            continue
        print("%-22s %-24s %-5s %-4s %10.3g %10.3g %10.4f %10.4f %7.2fx" % (
            r["problem"], r["kernel"], r["dtype"], "yes" if r["ok"] else "NO",
            r.get("max_abs_err", float("nan")), r.get("rel_l2", float("nan")),
            r["eager_ms"][0], r["triton_ms"][0], r["speedup"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated problem names")
    ap.add_argument("--json", help="write the result rows to this file")
    ap.add_argument("--cpu", action="store_true", help="check examples/kernels/cpu/ on the CPU")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None

    import torch
    rows = []
    if args.cpu:
        for path in sorted((KERNELS / "cpu").glob("*.py")):
            if only and path.stem not in only:
                continue
            try:
                rows.append(run_cpu_case(path))
            except Exception:
                rows.append({"problem": path.stem, "kernel": "cpu/" + path.stem, "dtype": "fp32",
                             "ok": False, "error": traceback.format_exc()})
        label = "cand_ms"
    else:
        if not torch.cuda.is_available():
            print("SKIP: CUDA is not available")
            return 77
        try:
            import triton  # noqa: F401
        except ImportError:
            print("SKIP: triton is not installed")
            return 77
        # cuDNN convolutions default to TF32 for fp32 tensors; the fp32 rows need true fp32
        # references (the kernels use IEEE products there). bf16 rows are unaffected.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        print("device: %s, torch %s, triton %s" % (torch.cuda.get_device_name(0),
                                                   torch.__version__, triton.__version__))
        for problem_stem, kernel_stem, dtypes in CASES:
            if only and problem_stem not in only:
                continue
            for dtype_name in dtypes:
                t0 = time.time()
                try:
                    row = run_gpu_case(problem_stem, kernel_stem, dtype_name)
                except Exception:
                    row = {"problem": problem_stem, "kernel": kernel_stem, "dtype": dtype_name,
                           "ok": False, "error": traceback.format_exc()}
                    print(row["error"], file=sys.stderr)
                row["wall_s"] = round(time.time() - t0, 1)
                rows.append(row)
                print("done %s %s in %.1fs" % (problem_stem, dtype_name, row["wall_s"]),
                      flush=True)
                gc.collect()
                torch.cuda.empty_cache()
        torch.manual_seed(SEED)
        for kernel_stem, model, make in variant_cases():
            if only and "variants" not in only and kernel_stem not in only:
                continue
            try:
                row = run_variant_case(kernel_stem, model, make)
            except Exception:
                row = {"problem": "variant", "kernel": kernel_stem, "dtype": "fp32",
                       "ok": False, "error": traceback.format_exc()}
            rows.append(row)
        label = "triton_ms"
    print()
    print_table(rows, label)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    failed = [r for r in rows if not r.get("ok")]
    for r in failed:
        if "error" in r:
            print("\n%s/%s: %s" % (r["problem"], r["dtype"], r["error"]), file=sys.stderr)
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
