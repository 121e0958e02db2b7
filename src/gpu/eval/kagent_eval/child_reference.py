"""Trusted child: runs only the problem's reference Model (never candidate code).

Sends, per trial, the digests of the inputs and of the reference outputs, and on request the
eager / torch.compile baseline timings measured with the same Timer the candidate gets.
"""
from . import child_common, digest, inputs, loader
from .timing import Timer, do_bench_mean


def run(ch, spec):
    device = spec["device"]
    ch.stage("load")
    torch = child_common.setup_torch(device, spec.get("threads"))
    dtype = loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    init_inputs = list(problem.get_init_inputs())
    model = loader.build_model(torch, problem.Model, init_inputs, spec["seed"], dtype, device)
    if spec.get("want_outputs"):
        for trial in range(spec["trials"]):
            ch.stage("run")
            args, dist = inputs.make_inputs(torch, problem, spec["seed"] + trial, trial, dtype, device)
            in_metas, in_arrays = digest.digest_list(torch, args, spec["sample_seed"])
            with torch.no_grad():
                out = model(*args)
            child_common.sync(torch, device)
            outs = digest.flatten_outputs(torch, out)
            out_metas, out_arrays = digest.digest_list(torch, outs, spec["sample_seed"])
            ch.send({"type": "trial", "trial": trial, "dist": dist, "inputs": in_metas,
                     "outputs": out_metas}, in_arrays + out_arrays)
            del args, out, outs
        if device != "cpu":
            # The roofline's FLOP count, once per problem: the counter's first use costs seconds,
            # and the count is the reference's, so candidates neither pay for it nor supply it.
            ch.stage("flops")
            ch.send({"type": "flops", "value": _flops(torch, problem, model, spec, dtype, device)})
    if spec.get("baselines"):
        ch.stage("baseline")
        ch.send({"type": "baselines", "result": baselines(torch, problem, model, spec, dtype, device)})


def _flops(torch, problem, model, spec, dtype, device):
    try:
        from . import roofline
        args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device)
        with torch.no_grad():
            return roofline.flops(model, args)
    except Exception:
        return None  # the candidate's sandbox counts them itself


def baselines(torch, problem, model, spec, dtype, device):
    bench = spec.get("bench") or {}
    timer = Timer(torch, device)
    args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device)
    res = {}
    want_do_bench = bench.get("do_bench") and device.startswith("cuda")
    for name in spec["baselines"]:
        fn = None
        try:
            if name == "eager":
                fn = model
            elif name in ("compile", "compile_max_autotune"):
                if not hasattr(torch, "compile"):
                    res[name + "_error"] = "ENOTSUP: torch %s has no torch.compile" % torch.__version__
                    continue
                mode = "max-autotune" if name == "compile_max_autotune" else None
                fn = torch.compile(model, mode=mode) if mode else torch.compile(model)
            else:
                res[name + "_error"] = "EBADREQ: unknown baseline"
                continue
            with torch.no_grad():
                call = lambda: fn(*args)
                res[name] = timer.measure(call, **_measure_opts(bench))
                if want_do_bench:
                    res.setdefault("do_bench", {})[name] = do_bench_mean(call)
        except Exception as e:
            res[name + "_error"] = "ERUN: %s: %s" % (type(e).__name__, str(e)[:500])
    return res


def _measure_opts(bench):
    keys = ("warmup", "reps", "min_reps", "max_reps", "min_time", "warmup_time")
    return {k: bench[k] for k in keys if bench.get(k) is not None}
