#!/usr/bin/env python3
"""GPU check of the evaluator's fail-closed rules through a real worker process.

    python3 tests/gpu/trust_gpu_check.py [--part escapes,sanitize,compare,memory,ka,baselines,
                                                 algorithmic]

escapes: on softmax 4096 x 4096 (fp32), the honest one-pass kernel is accepted; a side stream
joined back is accepted (after its re-measure); an unjoined side stream (whole forward, or one
short launch of 32 rows), a launch from a background thread, a huge spread, and a bound set below
the time (beyond speed-of-light) are each rejected at stage "timing" with a reason that names the
cause and no figure left on the result, and so are (ESTALE) kernels whose timed calls return a
stale output (on one call in sixteen, or most), an output cached by address, or one that drifts
with the call count (or EMISMATCH at stage benchmark, no figure, where the drift stays within each
sampled element's tolerance and only the last call's whole output shows it). algorithmic:
diag(A) @ B as a row scaling, a better algorithm than the reference's matmul, is accepted with its
speedup (and KernelBench's own L1 #12 where KAGENT_KERNELBENCH names its folder). sanitize:
compute-sanitizer passes a clean kernel and
finds an out-of-bounds read that no output shows; on showcase #4, racecheck checks the problem
shrunk (K / 16) and keeps that verdict, having run the kernels memcheck ran as stated. compare: interleaved timing ranks the one-pass
kernel above the three-pass one. memory: a 16 GiB input verifies and times without running out
of memory. ka: the ten kernels of KernelAgent's artifacts (KAGENT_KA_ARTIFACTS, default
../shared/data/ka-artifacts) load and get their verdicts (bf16). baselines: eager, torch.compile
and torch.compile max-autotune of the five showcase problems against do_bench (mean), in one run.
Prints a table; writes JSON to $OUT/trust_gpu_check_<part>.json when OUT is set.
Exit status: 0 all checks passed, 1 a check failed, 77 skipped (no CUDA here).
"""
import argparse
import glob
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
TRUST = os.path.join(ROOT, "tests", "fixtures", "trust")
SOFTMAX = os.path.join(TRUST, "softmax_problem.py")
SHOWCASE = ["4_matmul_gemv", "36_rmsnorm", "43_maxpool3d", "77_conv_transpose3d",
            "82_depthwise_conv2d"]
KA_DEFAULT = os.path.join(ROOT, "..", "shared", "data", "ka-artifacts")


def rejected_for(words):
    def accept(r):
        return (not r["ok"] and r.get("stage") == "timing" and r.get("code") == "EUNTRUSTED"
                and words in (r.get("error") or "") and "time_ms" not in r
                and "roofline" not in r and "speedup_vs_eager" not in r)
    return accept


def refused_with(code):
    """Refused at stage timing with that code and no figure left on the result."""
    def refuse(r):
        return (not r["ok"] and r.get("stage") == "timing" and r.get("code") == code
                and "time_ms" not in r and "speedup_vs_eager" not in r)
    return refuse


def stale_or_wrong_last(r):
    """A drift too small for any one sampled element's tolerance is met by the last timed call's
    output, checked whole (EMISMATCH at stage benchmark); a larger one by the samples (ESTALE).
    Either way no figure is left."""
    wrong_last = (not r["ok"] and r.get("stage") == "benchmark" and r.get("code") == "EMISMATCH"
                  and "output of the timed calls" in (r.get("error") or "")
                  and "time_ms" not in r and "speedup_vs_eager" not in r)
    return wrong_last or refused_with("ESTALE")(r)


def rejected_unsynced(r):
    """An output written on a stream nobody joins is read in a race: where the harness reads it
    first the trial mismatches (EMISMATCH at correctness), else the timing catches the escape.
    Either way the candidate is refused with no figure."""
    wrong = (not r["ok"] and r.get("stage") == "correctness" and r.get("code") == "EMISMATCH"
             and "time_ms" not in r and "speedup_vs_eager" not in r)
    return wrong or rejected_for("outside the timed events")(r)


def accepted(remeasured):
    def accept(r):
        return bool(r["ok"]) and r["trust"]["remeasured"] == remeasured and not [
            f for f in r.get("flags", []) if f in ("beyond_sol", "outside_timed_stream", "spread",
                                                   "untimed_work", "all_streams_unchecked")]
    return accept


ESCAPES = [  # candidate, extra job fields, accept, expected
    ("softmax_onepass.py", {}, accepted(False), "accepted"),
    ("softmax_side_stream_joined.py", {}, accepted(True), "accepted after re-measure"),
    ("softmax_side_stream.py", {}, rejected_unsynced, "EUNTRUSTED stream / EMISMATCH"),
    ("softmax_side_stream_short.py", {}, rejected_for("outside the timed events"),
     "EUNTRUSTED short"),
    ("softmax_thread.py", {}, rejected_for("outside the timed events"), "EUNTRUSTED thread"),
    ("softmax_spread.py", {}, rejected_for("vary too much"), "EUNTRUSTED spread"),
    ("softmax_onepass.py", {"sol_ms": 10.0}, rejected_for("speed-of-light"), "EUNTRUSTED SOL"),
    # every timed call's output is checked against its input set's reference
    ("softmax_stale_one_in_16.py", {}, refused_with("ESTALE"), "ESTALE 1 in 16"),
    ("softmax_stale_most.py", {}, refused_with("ESTALE"), "ESTALE most calls"),
    ("softmax_address_cache.py", {}, refused_with("ESTALE"), "ESTALE address cache"),
    ("softmax_drift.py", {}, stale_or_wrong_last, "ESTALE / EMISMATCH drift"),
    ("softmax_stale_one_in_16.py", {"confirm": True}, refused_with("ESTALE"),
     "ESTALE (confirm)"),
]


def short(r):
    keep = ("ok", "stage", "code", "error", "flags", "trust", "time_ms", "time_ms_first", "time_ms_hardened",
            "eager_ms", "compile_ms", "compile_max_autotune_ms", "baseline_times",
            "baseline_errors", "roofline", "speedup_vs_eager", "speedup_vs_compile", "elapsed",
            "candidate_kind", "trials", "property_trials", "checks", "generalizes", "replay_seed",
            "sanitizer", "candidates", "reference_s", "stage_s")
    return {k: r.get(k) for k in keep if k in r}


def _f(x):
    return "-" if x is None else "%.4g" % x


class Run:
    def __init__(self, w):
        self.w, self.rows, self.ok = w, [], True

    def record(self, part, name, passed, result, **extra):
        self.ok &= bool(passed)
        row = dict(part=part, name=name, passed=bool(passed), result=short(result), **extra)
        self.rows.append(row)
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, "trust_gpu_check_rows.json"), "w") as f:
                json.dump(self.rows, f, indent=1, default=str)
        return row

    def job(self, op, job, timeout=1200):
        reply = self.w.request(op, job, timeout=timeout)
        return reply.get("result") or {"ok": False, "error": reply.get("error")}


def part_escapes(run):
    for cand, extra, accept, want in ESCAPES:
        t0 = time.time()
        r = run.job("benchmark", dict({"problem": SOFTMAX, "candidate": os.path.join(TRUST, cand),
                                       "bench": {"min_time": 0.3, "baselines": []}}, **extra))
        passed = accept(r)
        first = (r.get("trust") or {})
        streams = (r.get("time_ms") or {}).get("all_streams") or {}
        first_streams = (r.get("time_ms_first") or {}).get("all_streams") or {}
        if first_streams and not first_streams.get("ok"):
            print("    first figure's streams: %s" % json.dumps(first_streams)[:400], flush=True)
        run.record("escapes", cand, passed, r, expected=want, wall_s=time.time() - t0)
        print("%-32s %-26s pass=%-5s %s | median %s | first %s second %s | uncovered max %s ms" % (
            cand, want, passed, (r.get("error") or "ok")[:110],
            _f((r.get("time_ms") or {}).get("median")), first.get("first_flags"),
            first.get("second_flags"), _f(streams.get("max_uncovered_ms"))), flush=True)
    # the old fixture: four launches on an unjoined side stream (ReLU, 256 MB)
    r = run.job("benchmark", {"problem": os.path.join(ROOT, "tests/fixtures/eval/gpu_relu_problem.py"),
                              "candidate": os.path.join(ROOT, "tests/fixtures/adversarial/gpu_side_stream.py"),
                              "bench": {"min_time": 0.3, "baselines": []}})
    passed = rejected_for("outside the timed events")(r)
    run.record("escapes", "gpu_side_stream.py", passed, r)
    print("%-32s %-26s pass=%-5s %s" % ("gpu_side_stream.py", "EUNTRUSTED stream", passed,
                                       (r.get("error") or "ok")[:110]), flush=True)


def part_sanitize(run):
    relu = os.path.join(TRUST, "relu_small_problem.py")
    for cand, want_ok, tools in (("tests/fixtures/eval/gpu_relu_triton.py", True,
                                  ["memcheck", "racecheck"]),
                                 ("tests/fixtures/trust/relu_out_of_bounds_read.py", False,
                                  ["memcheck"])):
        r = run.job("sanitize", {"problem": relu, "candidate": os.path.join(ROOT, cand),
                                 "tools": tools})
        passed = r.get("ok") is want_ok
        run.record("sanitize", os.path.basename(cand), passed, r)
        summary = {t: (v.get("ok"), v.get("errors"), round(v.get("seconds") or 0, 1))
                   for t, v in (r.get("tools") or {}).items()}
        print("sanitize %-30s want ok=%-5s got %s %s %s" % (os.path.basename(cand), want_ok,
              r.get("ok"), summary, (r.get("error") or "")[:200]), flush=True)
        if not passed:
            for t, v in (r.get("tools") or {}).items():
                print("   %s report: %s" % (t, (v.get("report") or "")[:1500]), flush=True)
    # the out-of-bounds reader passes every output check; only the sanitizer rejects it
    plain = run.job("verify", {"problem": relu, "candidate": os.path.join(
        ROOT, "tests/fixtures/trust/relu_out_of_bounds_read.py")})
    r = run.job("verify", {"problem": relu, "candidate": os.path.join(
        ROOT, "tests/fixtures/trust/relu_out_of_bounds_read.py"), "sanitize": ["memcheck"]})
    passed = bool(plain.get("ok")) and not r.get("ok") and r.get("code") == "ESANITIZE"
    run.record("sanitize", "job with sanitize", passed, r, without=short(plain))
    print("OOB reader: verify alone ok=%s; with sanitize=memcheck: pass=%s %s" % (
        plain.get("ok"), passed, r.get("error")), flush=True)
    # racecheck costs as much as the work it checks: #4 as stated takes about a minute under it
    t0 = time.time()
    r = run.job("sanitize", {"problem": os.path.join(ROOT, "examples/problems/4_matmul_gemv.py"),
                             "candidate": os.path.join(ROOT, "examples/kernels/4_matmul_gemv.py"),
                             "dtype": "bf16"}, timeout=1800)
    tools = r.get("tools") or {}
    race, mem = tools.get("racecheck") or {}, tools.get("memcheck") or {}
    passed = (r.get("ok") is True and mem.get("sizes") == {} and bool(race.get("sizes"))
              and "shrunk" not in race and mem.get("compiled") is not None
              and race.get("compiled") == mem.get("compiled"))
    run.record("sanitize", "4_matmul_gemv shrunk racecheck", passed, r, wall_s=time.time() - t0)
    print("sanitize 4_matmul_gemv: ok=%s in %.1f s; memcheck %.1f s at %s, racecheck %.1f s at %s "
          "(kernels %s / %s) pass=%s %s" % (
              r.get("ok"), time.time() - t0, mem.get("seconds") or 0, mem.get("sizes"),
              race.get("seconds") or 0, race.get("sizes"), mem.get("compiled"),
              race.get("compiled"), passed, (r.get("error") or "")[:200]), flush=True)


def part_compare(run):
    r = run.job("compare", {"problem": SOFTMAX, "candidates": [
        os.path.join(ROOT, "examples/kernels/softmax.py"), os.path.join(TRUST, "softmax_onepass.py")],
        "rounds": 8})
    c = r.get("candidates") or []
    sp = c[1]["speedup"] if len(c) == 2 else {}
    passed = bool(r.get("ok")) and (sp.get("p10") or 0) > 1.0
    run.record("compare", "three-pass vs one-pass", passed, r)
    print("compare three-pass vs one-pass: ok=%s speedup median %s (p10 %s, p90 %s); cv %s / %s %s" % (
        r.get("ok"), _f(sp.get("median")), _f(sp.get("p10")), _f(sp.get("p90")),
        _f(c[0]["time_ms"].get("cv")) if c else "-", _f(c[1]["time_ms"].get("cv")) if c else "-",
        (r.get("error") or "")[:200]), flush=True)


def part_memory(run):
    t0 = time.time()
    r = run.job("benchmark", {"problem": os.path.join(TRUST, "avgpool_16gib_problem.py"),
                              "candidate": os.path.join(TRUST, "avgpool_16gib_triton.py"),
                              "dtype": "fp32", "bench": {"min_time": 0.3, "baselines": ["eager"]}},
                timeout=1800)
    passed = bool(r.get("ok"))
    run.record("memory", "16 GiB input", passed, r, wall_s=time.time() - t0)
    print("16 GiB input (AvgPool2d k=11, fp32): ok=%s median %s ms eager %s ms trials %s+%s "
          "wall %.0f s %s" % (r.get("ok"), _f((r.get("time_ms") or {}).get("median")),
                              _f(r.get("eager_ms")), r.get("trials"), r.get("property_trials"),
                              time.time() - t0, (r.get("error") or "")[:300]), flush=True)


def part_ka(run, base):
    dirs = sorted(d for d in glob.glob(os.path.join(base, "*")) if os.path.isfile(
        os.path.join(d, "problem.py")))
    if not dirs:
        print("ka: no artifacts under %s" % base)
        run.ok = False
        return
    for d in dirs:
        for kind in ("input_kernel.py", "optimized_kernel_beam_search.py"):
            t0 = time.time()
            r = run.job("benchmark", {"problem": os.path.join(d, "problem.py"),
                                      "candidate": os.path.join(d, kind), "dtype": "bf16",
                                      "fallback_policy": "flag",
                                      "bench": {"min_time": 0.3, "baselines": []}}, timeout=1500)
            run.record("ka", "%s/%s" % (os.path.basename(d), kind), True, r,
                       wall_s=time.time() - t0)
            print("ka %-24s %-10s ok=%-5s %s %s" % (os.path.basename(d)[:24], kind[:9], r.get("ok"),
                  _f((r.get("time_ms") or {}).get("median")), (r.get("error") or "")[:150]),
                  flush=True)


def part_algorithmic(run):
    """A better algorithm is no cheat: diag(A) @ B done as a row scaling beats the reference's
    FLOP bound by far and stays inside its compulsory memory traffic. Accepted with its
    speedup, its roofline saying "fewer operations than the reference". KernelBench's own
    problem file (KAGENT_KERNELBENCH, its level1 folder) too, where it is there."""
    cases = [("diag_matmul_problem.py", os.path.join(TRUST, "diag_matmul_problem.py"))]
    kb = os.environ.get("KAGENT_KERNELBENCH")
    if kb:
        for name in sorted(os.listdir(os.path.join(kb, "level1"))):
            if name.startswith("12_"):
                cases.append(("kernelbench L1 " + name, os.path.join(kb, "level1", name)))
    for label, problem in cases:
        t0 = time.time()
        r = run.job("benchmark", {"problem": problem, "dtype": "fp32",
                                  "candidate": os.path.join(TRUST, "diag_rowscale_triton.py"),
                                  "bench": {"baselines": ["eager"]}})
        roof = r.get("roofline") or {}
        passed = bool(r["ok"]) and (r.get("speedup_vs_eager") or 0) > 1.0 and \
            "beyond_sol" not in r.get("flags", []) and \
            (roof.get("memory_sol_pct") or 0) <= (roof.get("sol_limit_pct") or 0)
        run.record("algorithmic", label, passed, r, wall_s=time.time() - t0)
        print("algorithmic %-40s pass=%-5s %s | median %s ms, eager %s ms, %sx | memory SOL %s%%, "
              "fewer_ops %s, note %s" % (
                  label, passed, (r.get("error") or "ok")[:100],
                  _f((r.get("time_ms") or {}).get("median")), _f(r.get("eager_ms")),
                  _f(r.get("speedup_vs_eager")), _f(roof.get("memory_sol_pct")),
                  roof.get("fewer_ops"), roof.get("note")), flush=True)


def part_baselines(run, names, modes, min_time=None):
    bench = {"baselines": modes, "do_bench": True}
    if min_time:
        bench["min_time"] = min_time
    for name in names:
        t0 = time.time()
        r = run.job("benchmark", {"problem": os.path.join(ROOT, "examples/problems", name + ".py"),
                                  "candidate": os.path.join(ROOT, "examples/kernels", name + ".py"),
                                  "dtype": "bf16", "fallback_policy": "flag", "bench": bench},
                    timeout=1800)
        db = r.get("do_bench") or {}
        agree = {}
        for m in modes:
            ours = ((r.get("baseline_times") or {}).get(m) or {}).get("median")
            if ours and db.get(m):
                agree[m] = ours / db[m] - 1.0
        passed = len(agree) == len(modes) and all(abs(v) <= 0.03 for v in agree.values())
        run.record("baselines", name, passed, r, agree=agree, wall_s=time.time() - t0)
        print("baselines %-22s %s | do_bench %s | agree %s %s" % (
            name, {m: _f(((r.get("baseline_times") or {}).get(m) or {}).get("median")) for m in modes},
            {m: _f(v) for m, v in db.items()}, {m: "%+.1f%%" % (100 * v) for m, v in agree.items()},
            r.get("baseline_errors") or ""), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", default="escapes,sanitize,compare,memory")
    ap.add_argument("--only", default=",".join(SHOWCASE))
    ap.add_argument("--modes", default="eager,compile,compile_max_autotune")
    ap.add_argument("--min-time", type=float, default=None,
                    help="baselines: seconds of timed calls (default: the evaluator's)")
    args = ap.parse_args()
    from worker_client import Worker, have_cuda
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    w = Worker(0)
    print("worker:", w.ready, flush=True)
    run = Run(w)
    parts = args.part.split(",")
    try:
        for part in parts:
            if part == "escapes":
                part_escapes(run)
            elif part == "sanitize":
                part_sanitize(run)
            elif part == "compare":
                part_compare(run)
            elif part == "memory":
                part_memory(run)
            elif part == "algorithmic":
                part_algorithmic(run)
            elif part == "ka":
                part_ka(run, os.environ.get("KAGENT_KA_ARTIFACTS", KA_DEFAULT))
            elif part == "baselines":
                part_baselines(run, [s for s in args.only.split(",") if s], args.modes.split(","),
                               args.min_time)
    finally:
        w.close()
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, "trust_gpu_check_%s.json" % "_".join(parts)), "w") as f:
                json.dump({"worker": w.ready, "rows": run.rows}, f, indent=1, default=str)
    print("RESULT:", "PASS" if run.ok else "FAIL")
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main())
