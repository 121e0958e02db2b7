"""Trusted child: runs only the problem's reference Model (never candidate code).

Sends, per trial, the digests of the inputs and of the reference outputs (regular trials,
property trials and resized problems, see ``trial_plan``) and, where shadow.Shadow.wants it
(bf16/fp16 jobs; an fp32 job's all-zero and scaled trials, and every trial on a GPU that allows TF32), of
the outputs' shadow at a higher precision (shadow.py), the roofline's
inputs (FLOPs, parameter bytes, the GPU's measured peaks), and on request the eager /
torch.compile baseline timings measured with the same Timer the candidate gets.
"""
from . import child_common, shadow
from ..common import digest, extra_trials, gpu_memory, inputs, loader, timed_inputs
from . import unleased_compile
from ..common.timing import bench_options, do_bench_mean, fake_noisy_clock


def trial_plan(spec, problem=None):
    """The trials of a job, in order: [{trial, seed, dist, sizes, kind, late}]. Regular trials
    use the job's seed; property trials and resized problems use the replay seed. Reference and
    candidate children build the same plan from the same spec. "late" trials (non-finite inputs,
    resized problems) report rather than reject by default, so the candidate runs them after its
    timed stages and a crash there cannot take the timing with it."""
    plan = []
    for t in range(spec["trials"]):
        plan.append({"trial": t, "seed": spec["seed"] + t, "dist": inputs.distribution(t),
                     "sizes": None, "kind": "regular", "late": False})
    base = spec.get("replay_seed", spec["seed"])
    if spec.get("properties", True):
        for k, dist in enumerate(inputs.PROPERTIES):
            plan.append({"trial": len(plan), "seed": base + 101 + k, "dist": dist, "sizes": None,
                         "kind": "property", "late": dist == "nonfinite"})
    if spec.get("generalize") and problem is not None:
        for k, sizes in enumerate(inputs.size_variants(problem)):
            plan.append({"trial": len(plan), "seed": base + 211 + k, "dist": "signed",
                         "sizes": sizes, "kind": "resized", "late": True})
    plan.extend(extra_trials.plan(spec, len(plan), base))  # a reviewer's inputs, last
    return plan


def run(ch, spec):
    device = spec["device"]
    ch.stage("load")
    fake_noisy_clock(spec.get("fake_noisy_clock"))  # TEST ONLY (noise.FAKE_CLOCK_ENV)
    torch = child_common.setup_torch(device, spec.get("threads"))
    dtype = loader.torch_dtype(torch, spec["dtype"])
    problem = loader.load_module("problem", spec["problem"])
    init_inputs = list(problem.get_init_inputs())
    model = loader.build_model(torch, problem.Model, init_inputs, spec["seed"], dtype, device)
    contract = None
    if spec.get("want_outputs"):
        precise = shadow.Shadow(torch, problem, init_inputs, model, spec)
        precise.start()
        contract = inputs.input_contract(torch, problem, device)
        finite = None  # per output: finite in every regular trial so far
        # the reference's peak over its trials (inputs, outputs, temporaries; not the shadow's
        # higher-precision copies): the pool admits jobs onto a GPU by it (gpu_memory.py)
        peak = _reset_peak(torch, device)
        for entry in trial_plan(spec, problem):
            ch.stage("run")

            def skip(reason):
                ch.send({"type": "trial", "trial": entry["trial"], "skipped": True,
                         "kind": entry["kind"], "dist": entry["dist"], "reason": reason})
            drawn = inputs.as_drawn(entry["dist"], contract)
            if entry["kind"] == "property" and inputs.leaves_all_as_drawn(entry["dist"], contract):
                skip("outside the problem's input contract: %s" % _drawn_text(drawn))
                continue
            try:
                args, dist = extra_trials.trial_inputs(torch, problem, entry, dtype, device,
                                                       contract)
                in_metas = digest.input_digests(torch, args, spec["sample_seed"])
                with torch.no_grad():
                    out = model(*args)
                child_common.sync(torch, device)
            except Exception as e:
                if entry["kind"] == "regular":
                    raise
                # a resizing (or property) the reference itself rejects says nothing of the
                # candidate: that trial is left out
                skip("%s: %s" % (type(e).__name__, str(e)[:300]))
                args = out = None
                continue
            outs = digest.flatten_outputs(torch, out)
            out_metas, out_arrays = digest.digest_list(torch, outs, spec["sample_seed"])
            del out, outs
            if entry["kind"] == "regular":
                finite = _finite_outputs(out_metas, finite)
            elif entry["kind"] in ("property", extra_trials.KIND) and entry["dist"] != "nonfinite":
                overflow = [k for k, ok in enumerate(_finite_outputs(out_metas, None))
                            if not ok and finite and k < len(finite) and finite[k]]
                if overflow:
                    # an overflow (or a domain error) of the reference itself: any candidate's
                    # output there is as right as the reference's, so the trial judges nothing
                    skip("the reference's output %s is not finite on these inputs, where it is "
                         "on every regular trial" % ", ".join(str(k) for k in overflow))
                    del args
                    continue
            msg = {"type": "trial", "trial": entry["trial"], "dist": dist, "kind": entry["kind"],
                   "sizes": entry["sizes"], "seed": entry["seed"], "inputs": in_metas,
                   "outputs": out_metas}
            if drawn:
                msg["as_drawn"] = [k for k, _ in drawn]
                msg["as_drawn_reason"] = _drawn_text(drawn)
            if entry["trial"] == 0:
                msg["input_contract"] = contract
            peak = max(peak, gpu_memory.peak_bytes(torch, device) or 0)
            shadow_arrays = []
            if precise.wants(dist):
                # bf16/fp16: every kind of trial (inputs of one sign, the "negative" property,
                # give a convolution's output an offset as large against its variation as small
                # ones do); fp32: the all-zero and scaled trials (shadow.FP64_DISTS), and every trial where
                # the reference may compute in TF32
                ch.stage("shadow")
                metas, shadow_arrays, note = precise.digest(args, out_metas, spec["sample_seed"])
                if metas is not None:
                    msg["shadow"] = metas
                elif note:
                    msg["shadow_note"] = note
            ch.send(msg, out_arrays + shadow_arrays)
            del args
            _reset_peak(torch, device)  # the shadow's copies are not the problem's
        precise.close()  # its memory back before the baselines are timed
        if device != "cpu":
            # The roofline's inputs, once per problem: the FLOP counter's first use costs
            # seconds, and the figures are the reference's, so candidates neither pay for them
            # nor supply them.
            ch.stage("flops")
            ch.send({"type": "flops", "value": _flops(torch, problem, model, spec, dtype, device),
                     "param_bytes": _param_bytes(model), "peaks": spec.get("peaks"),
                     "memory": {"peak_bytes": peak}})
    if spec.get("baselines"):
        # with a gate (reference.py), the lease turns exclusive only now: the outputs, the FLOP
        # count and the process's start ran under the lease shared
        ch.gate(child_common.EXCLUSIVE)
        ch.stage("baseline")
        # the timed input sets are the trials' own inputs, made by the same contract
        if contract is None:
            contract = inputs.input_contract(torch, problem, device)
        ch.send({"type": "baselines", "result": baselines(
            torch, problem, model, dict(spec, input_contract=contract), dtype, device, ch)})


def _reset_peak(torch, device):
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    return 0


def _drawn_text(drawn):
    return "; ".join("input %d: %s" % (k, why) for k, why in drawn)


def _finite_outputs(out_metas, so_far):
    """Per output: whether it has no NaN or infinity (the digest's whole-tensor count), and so
    had every earlier trial where so_far (the same list of the earlier trials) is given."""
    now = [not ((m.get("stats") or {}).get("nonfinite") or 0) for m in out_metas]
    if so_far is None:
        return now
    return [a and (so_far[k] if k < len(so_far) else True) for k, a in enumerate(now)]


def _flops(torch, problem, model, spec, dtype, device):
    try:
        from ..profile import roofline
        args, _ = inputs.make_inputs(torch, problem, spec["seed"], 0, dtype, device)
        with torch.no_grad():
            return roofline.flops(model, args)
    except Exception:
        return None


def _param_bytes(model):
    try:
        from ..profile import roofline
        return roofline.nbytes(list(model.parameters()))
    except Exception:
        return 0


def baselines(torch, problem, model, spec, dtype, device, ch):
    bench = spec.get("bench") or {}
    timer = child_common.timer(torch, device, traced=False)
    # the input sets the candidate's timed calls rotate through, in the same order, so a
    # baseline and a candidate are timed on the same inputs (timed_inputs.py)
    sets = timed_inputs.Rotation(torch, problem, spec, dtype, device,
                                 timed_inputs.set_trials(trial_plan(spec, problem)), rotate=False)
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
                if name == "compile_max_autotune":  # its compile times kernels: under the lease
                    fn = torch.compile(model, mode="max-autotune")
                elif device.startswith("cuda"):  # Inductor's backend, compiled with the lease given up
                    fn = torch.compile(model, backend=unleased_compile.backend(torch, ch, child_common.EXCLUSIVE))
                else:
                    fn = torch.compile(model)
            else:
                res[name + "_error"] = "EBADREQ: unknown baseline"
                continue
            with torch.no_grad():
                call = lambda: fn(*sets.current)
                res[name] = timer.measure(call, **bench_options(bench), feed=sets)
                if want_do_bench:
                    res.setdefault("do_bench", {})[name] = do_bench_mean(call)
        except Exception as e:
            res[name + "_error"] = "ERUN: %s: %s" % (type(e).__name__, str(e)[:500])
    return res

