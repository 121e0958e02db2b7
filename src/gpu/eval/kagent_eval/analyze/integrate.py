"""The `integrate` kind of the `analyze` op (agents/integrate.lua): a verified kernel checked
inside a whole model.

The model file is a KernelBench problem (Model, get_inputs, get_init_inputs: a Level 3 problem or
a user's nn.Module file written so). Its submodules of class `match_class` (or the one at
`match_path`) are the targets. One forward of the model records each target's inputs; on those
inputs the kernel (built as the evaluator builds a candidate for `kernel_problem`, the problem it
was written for, then given the target's parameters and buffers where names and shapes agree) must
give the target's outputs, else that target is left alone and the reason recorded. A kernel written
for another layout or signature (Level 1 #36's RMSNorm over dim 1, no weight, in place of Llama's
over the last dim, times a weight) goes in through an adapter file: its `adapt(kernel, target)`
returns the callable that replaces the target (the glue it adds is timed with the kernel). The matching
targets are replaced, and the whole model's outputs must equal the original's (the dtype's
tolerances). Each target is timed standalone against the kernel on its recorded inputs (a median
of `reps` calls: a rough figure beside the in-model one). The whole model is not timed here: the
in-model figure is a benchmark job's with the job field `in_model` (in_model.py), under every
trust rule of a benchmark (agents/integrate.lua runs it on the targets replaced here).
"""
import copy
import time

from ..common import in_model, inputs, loader
from ..judge import compare, shadow_judge


def _clone(torch, v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if isinstance(v, (tuple, list)):
        return type(v)(_clone(torch, x) for x in v)
    return v


def _median_ms(torch, device, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def _outputs(v):
    if hasattr(v, "last_hidden_state"):  # a transformers output object
        return [v.last_hidden_state]
    return list(v) if isinstance(v, (tuple, list)) else [v]


def _same(torch, a, b, rtol, atol):
    fa, fb = _outputs(a), _outputs(b)
    if len(fa) != len(fb):
        return False, "%d outputs instead of %d" % (len(fb), len(fa))
    worst = 0.0
    for x, y in zip(fa, fb):
        if not isinstance(x, torch.Tensor):
            continue
        if x.shape != y.shape:
            return False, "shape %s instead of %s" % (list(y.shape), list(x.shape))
        xf, yf = x.detach().float(), y.detach().float()
        worst = max(worst, (xf - yf).abs().max().item() if xf.numel() else 0.0)
        if not torch.allclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True):
            return False, "differs by up to %.3g (rtol %g, atol %g)" % ((xf - yf).abs().max().item(), rtol, atol)
    return True, worst


def _by_fp32(torch, model, args, expected, got, rtol, atol):
    """A bf16/fp16 model whose integrated output differs from the original's beyond the dtype's
    tolerance, judged as the evaluator judges a candidate there (shadow_judge.judge_by_shadow): both
    against the model run in fp32 on the same inputs (its own weights upcast, exact). Through
    many layers at that precision the original is itself off the fp32 result by more than the
    tolerance, and the integrated model passes where its error stays within the factor the
    evaluator allows of the original's own. (ok, {rule, cand_err_norm, ref_err_norm} or reason)."""
    wide = copy.deepcopy(model).float()
    wargs = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        shadow = wide(*wargs)
    del wide
    worst = None
    for e, g, w in zip(_outputs(expected), _outputs(got), _outputs(shadow)):
        if not isinstance(e, torch.Tensor):
            continue
        d = [{"kind": "tensor", "data": t.detach().float().cpu().numpy(), "shape": list(t.shape),
              "full": True, "dtype": "float32"} for t in (g, e, w)]
        res = shadow_judge.judge_by_shadow(d[0], d[1], d[2], rtol, atol)
        if res is None:
            return False, "and the original model agrees with its fp32 run where the integrated one does not"
        if not res["ok"]:
            return False, "and against the model run in fp32: " + str(res["reason"])
        if worst is None or res["cand_err_norm"] > worst["cand_err_norm"]:
            worst = {k: res.get(k) for k in ("rule", "cand_err_norm", "ref_err_norm", "shadow_norm")}
    return True, worst


def run(torch, ch, spec, shrink):
    device, dtype = spec["device"], loader.torch_dtype(torch, spec["dtype"])
    rtol, atol = compare.tolerances(spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    shrunk = shrink(torch, problem, spec, dtype, device) if spec.get("shrink") else None
    model = loader.build_model(torch, problem.Model, list(problem.get_init_inputs()), spec["seed"], dtype, device)
    args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device, "own")
    kprob = loader.load_module("kernel_problem", spec["kernel_problem"])
    kinit = list(kprob.get_init_inputs())
    kref = loader.build_model(torch, kprob.Model, kinit, spec["seed"], dtype, device)
    kmod = loader.load_module("kernel", spec["kernel"])
    adapter = loader.load_module("adapter", spec["adapter"]) if spec.get("adapter") else None
    if adapter is not None and not callable(getattr(adapter, "adapt", None)):
        return {"ok": False, "error": "EADAPTER: the adapter file defines no adapt(kernel, target)"}

    targets = []
    for name, m in model.named_modules():
        if not name:
            continue
        if (spec.get("match_path") and name == spec["match_path"]) or (
                spec.get("match_class") and type(m).__name__ == spec["match_class"]):
            targets.append((name, m))
    if not targets:
        root = " (the model itself is never replaced, only its submodules)" if (
            spec.get("match_class") == type(model).__name__) else ""
        return {"ok": False, "error": "ENOMATCH: no submodule %s in the model%s (its submodules' classes: %s)" % (
            ("at " + spec["match_path"]) if spec.get("match_path") else ("of class " + spec["match_class"]), root,
            ", ".join(sorted({type(m).__name__ for n, m in model.named_modules() if n})[:40]) or "none")}

    ch.stage("run")
    seen = {}

    def recorder(name):
        def hook(mod, a):
            if name not in seen:
                seen[name] = _clone(torch, a)
            # None: a pre-hook's result would replace the module's inputs
        return hook

    hooks = [m.register_forward_pre_hook(recorder(name)) for name, m in targets]
    with torch.no_grad():
        expected = model(*args)
    for h in hooks:
        h.remove()

    integrated = copy.deepcopy(model)
    rows, replaced = [], []
    with torch.no_grad():
        for name, m in targets:
            row = {"path": name, "class": type(m).__name__, "matched": False}
            rows.append(row)
            if name not in seen:
                row["reason"] = "not called by the model's forward"
                continue
            try:
                # the target of the copy that is run, so an adapter reads that model's parameters
                cand = in_model.candidate_for(torch, spec, kmod, kref, kinit, adapter, integrated.get_submodule(name),
                                  dtype, device)
            except Exception as e:
                if adapter is None:
                    raise
                row["reason"] = "the adapter fails on this submodule: %s: %s" % (type(e).__name__, str(e)[:200])
                continue
            a = seen[name]
            try:
                got = cand(*_clone(torch, a))
            except Exception as e:  # the kernel does not take this submodule's inputs
                row["reason"] = "the kernel fails on its inputs: %s: %s" % (type(e).__name__, str(e)[:200])
                continue
            ok, why = _same(torch, m(*_clone(torch, a)), got, rtol, atol)
            if not ok:
                row["reason"] = "the kernel does not compute this submodule: " + why
                continue
            row["matched"] = True
            row["standalone_ref_ms"] = _median_ms(torch, device, lambda: m(*a), spec["reps"])
            row["standalone_kernel_ms"] = _median_ms(torch, device, lambda: cand(*a), spec["reps"])
            row["standalone_speedup"] = row["standalone_ref_ms"] / row["standalone_kernel_ms"]
            in_model.set_submodule(integrated, name, cand)
            replaced.append(name)
    result = {"ok": True, "targets": rows, "replaced": replaced, "shrunk": shrunk, "adapted": adapter is not None}
    if not replaced:
        result.update(verified=False, reason="no target computes what the kernel computes")
        return result
    with torch.no_grad():
        got = integrated(*args)
    ok, why = _same(torch, expected, got, rtol, atol)
    if not ok and spec["dtype"] in ("bf16", "fp16"):
        wide_ok, wide = _by_fp32(torch, model, args, expected, got, rtol, atol)
        if wide_ok:
            ok, result["judged_by_fp32"] = True, wide
            why = max((e.float() - g.float()).abs().max().item()
                      for e, g in zip(_outputs(expected), _outputs(got)) if isinstance(e, torch.Tensor))
        else:
            why = "%s, %s" % (why, wide)
    result["verified"] = ok
    if not ok:
        result["reason"] = "the integrated model's output " + why
        return result
    result["max_abs_diff"] = why
    ref = sum(r["standalone_ref_ms"] for r in rows if r.get("matched"))
    ker = sum(r["standalone_kernel_ms"] for r in rows if r.get("matched"))
    result["standalone_speedup"] = ref / ker if ker > 0 else None
    return result
