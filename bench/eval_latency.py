#!/usr/bin/env python3
"""Per-candidate evaluation latency: a warm evaluator worker vs a fresh interpreter per candidate.

    python3 bench/eval_latency.py [--n 5] [--cpu [--sampled]] [--nospare] [--nosandbox] [--gap S]
        [--stop ci|time] [--min-time S] [--before DIR]

Each candidate is verified (5 trials) and benchmarked (no baselines; the timed loop by the
default rule, or with --stop time a fixed loop of --min-time seconds, 0.1 by default). Warm: one
long-lived worker (torch/triton imported once, a sandbox per job, prepared ahead of it by the
worker's spare; --nospare also times one forked on demand, --nosandbox one whose children are
not confined: KAGENT_EVAL_SANDBOX=0, the cost of the sandbox). Fresh: a new worker
process per candidate (interpreter start, imports, CUDA context, reference outputs), which is
what running each candidate as its own script costs. Overhead = wall time minus the timed loop.
Prints a table, then where a warm job's time goes (the worker's phases and the candidate's stages,
medians) and the harness overhead: wall minus compile minus the timed loop; writes JSON to $OUT/eval_latency.json when OUT is set.
--sampled (with --cpu): a ReLU over 8 Mi elements instead of 16 Ki, whose outputs travel and
are compared as samples (its inputs as a fingerprint of the same positions), as the GPU
fixture's are. --before DIR: only the warm jobs,
on a worker of another copy of the evaluator (DIR: its src/gpu/eval) and on one of this tree's,
taking turns, their phases and harness overheads side by side.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
from worker_client import Worker  # noqa: E402


def candidate_text(i, cpu):
    i += ID_BASE
    path = "tests/fixtures/eval/%s" % ("relu_good.py" if cpu else "gpu_relu_triton.py")
    with open(os.path.join(ROOT, path)) as f:
        return f.read() + "\n# candidate variant %d\n" % i


# added to every candidate's variant number: two runs on one machine (this evaluator against an
# earlier copy) must not share candidates, or the second finds them in Triton's disk cache
ID_BASE = 0


# the timed loop's rule (--stop): "ci" (the default rule) or "time" (the fixed loop, --min-time s)
BENCH = {"min_time": 0.1, "baselines": []}


# the CPU problem (--sampled: one whose outputs travel as samples)
CPU_PROBLEM = ["relu_problem.py"]


def job(i, cpu):
    prob = CPU_PROBLEM[0] if cpu else "gpu_relu_problem.py"
    return {"problem": os.path.join(ROOT, "tests/fixtures/eval", prob), "candidate": candidate_text(i, cpu),
            "bench": dict(BENCH)}


def one(w, i, cpu):
    t0 = time.perf_counter()
    r = w.request("benchmark", job(i, cpu), timeout=600)
    wall = time.perf_counter() - t0
    res = r["result"]
    loop = ((res.get("time_ms") or {}).get("loop_ms") or 0.0) / 1e3
    return {"ok": res.get("ok"), "prepared": res.get("prepared"), "prepare_s": res.get("prepare_s"),
            "warmed": res.get("warmed"), "wall_s": wall, "loop_s": loop, "overhead_s": wall - loop,
            "error": res.get("error"), "stage_s": res.get("stage_s"), "reference_s": res.get("reference_s"),
            "elapsed_s": res.get("elapsed"), "timeline": timeline(res),
            "worker_s": res.get("worker_s") or {}, "calls": (res.get("time_ms") or {}).get("n"),
            "trust": res.get("trust"), "build_parts": res.get("build_parts") or {}}


def timeline(res):
    """When each stage began, in seconds from the job's start, and "end": where the time not
    inside any stage (sandbox start, reference lookup, comparisons, the reply) lies."""
    at, t0 = res.get("stage_at") or {}, res.get("started_at")
    if t0 is None:
        return {}
    line = {k: v - t0 for k, v in at.items()}
    line["end"] = res.get("elapsed") or 0.0
    return line


def warm_rows(device, cpu, n, first_id, env):
    """n warm jobs on a worker started with `env` (after one job that warms it up)."""
    w = Worker(device, env=env)
    one(w, first_id, cpu)
    rows = [one(w, first_id + 1 + i, cpu) for i in range(n)]
    w.close()
    return rows


def phase_table(rows):
    """Where a job's wall time goes, median seconds per phase: the worker's own phases, the
    candidate's stages, and the reply's way back (wall minus the worker's elapsed)."""
    phases = {}
    for r in rows:
        w, st = r["worker_s"], r["stage_s"] or {}
        parts = {"worker: static checks": w.get("static"), "worker: reference": w.get("reference"),
                 "worker: to the first stage (spare/fork)": w.get("to_first_stage"),
                 "worker: checks after the child": w.get("verdict"),
                 "worker: wait for the child's exit": w.get("exit_wait"),
                 "reply and request transport": (r["wall_s"] - (r["elapsed_s"] or 0.0))}
        parts.update(("worker check: " + k, v) for k, v in (w.get("checks") or {}).items())
        parts.update(("child: " + k, v) for k, v in st.items())
        parts.update(("child: build: " + k, v) for k, v in (r.get("build_parts") or {}).items()
                     if not isinstance(v, bool))
        for k, v in parts.items():
            if v is not None:
                phases.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in phases.items()}


def harness_s(rows):
    """The harness overhead, median seconds: wall minus compile minus the timed loop."""
    return statistics.median(r["wall_s"] - (r["stage_s"] or {}).get("compile", 0.0) - r["loop_s"]
                             for r in rows)


def print_phases(label, rows):
    if not rows:
        return {}
    table = phase_table(rows)
    compile_s = statistics.median((r["stage_s"] or {}).get("compile", 0.0) for r in rows)
    loop_s = statistics.median(r["loop_s"] for r in rows)
    wall = statistics.median(r["wall_s"] for r in rows)
    print("%s jobs, per phase (median s over %d):" % (label, len(rows)))
    for k, v in sorted(table.items(), key=lambda kv: -kv[1]):
        print("  %-44s %7.3f" % (k, v))
    print("  %-44s %7.3f  (wall %.3f - compile %.3f - timed loop %.3f; target 0.4)" % (
        "harness overhead", wall - compile_s - loop_s, wall, compile_s, loop_s))
    print("  timed calls per job (median): %s" % statistics.median(r["calls"] or 0 for r in rows))
    again = [r for r in rows if (r.get("trust") or {}).get("remeasured")]
    if again:
        print("  re-measured in a fresh process: %d of %d (first flags: %s)" % (
            len(again), len(rows), sorted({f for r in again for f in r["trust"].get("first_flags") or []})))
    return dict(table, harness_overhead=wall - compile_s - loop_s)


def before_after(device, cpu, n, before):
    """n warm jobs each on a worker of the evaluator at `before` (another copy's src/gpu/eval)
    and on one of this tree's, taking turns (the order swapped every job, each worker warmed up
    by a job first): the phases' medians side by side, and before/after."""
    here = os.path.join(ROOT, "src", "gpu", "eval")
    saved = os.environ.get("KAGENT_EVAL_PYTHONPATH")
    workers = {}
    try:
        for name, path in (("before", before), ("after", here)):
            os.environ["KAGENT_EVAL_PYTHONPATH"] = path  # worker_client starts the worker on it
            workers[name] = Worker(device)
    finally:
        if saved is None:
            os.environ.pop("KAGENT_EVAL_PYTHONPATH", None)
        else:
            os.environ["KAGENT_EVAL_PYTHONPATH"] = saved
    rows = {name: [] for name in workers}
    for i in range(n + 1):
        order = list(workers) if i % 2 == 0 else list(workers)[::-1]
        for k, name in enumerate(order):
            r = one(workers[name], 500 + 2 * i + k, cpu)
            if i:  # the first job of each warms it up
                rows[name].append(r)
    for w in workers.values():
        w.close()
    tables = {name: dict(phase_table(r), wall=statistics.median(x["wall_s"] for x in r),
                         harness=harness_s(r))
              for name, r in rows.items()}
    print("side by side, %d warm jobs each, taking turns (median s):" % n)
    print("  %-44s %8s %8s %8s" % ("phase", "before", "after", "ratio"))
    b, a = tables["before"], tables["after"]
    for k in sorted(set(b) & set(a), key=lambda k: -b[k]):
        if max(b[k], a[k]) >= 0.005:
            print("  %-44s %8.3f %8.3f %8.2f" % (k, b[k], a[k], b[k] / a[k] if a[k] else float("nan")))
    return tables


def stage_medians(rows):
    keys = sorted({k for r in rows for k in (r["stage_s"] or {})})
    return {k: round(statistics.median((r["stage_s"] or {}).get(k, 0.0) for r in rows), 3)
            for k in keys}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--before", metavar="DIR",
                    help="only compare with another copy of the evaluator (its src/gpu/eval), "
                         "jobs taking turns")
    ap.add_argument("--sampled", action="store_true",
                    help="with --cpu: a problem whose outputs travel as samples (8 Mi elements)")
    ap.add_argument("--gap", type=float, default=0.0,
                    help="also time jobs sent this many seconds apart (a paced, warm worker)")
    ap.add_argument("--fresh", type=int, default=None,
                    help="fresh-interpreter candidates to time (default max(2, n/2); 0: none)")
    ap.add_argument("--tag", default="", help="suffix of the JSON file under $OUT")
    ap.add_argument("--id-base", type=int, default=0,
                    help="first candidate variant number (runs compared side by side need different ones)")
    ap.add_argument("--nospare", action="store_true",
                    help="also time a warm worker without its prepared spare sandbox")
    ap.add_argument("--nosandbox", action="store_true",
                    help="also time a warm worker whose children are not confined")
    ap.add_argument("--stop", default="ci", choices=("ci", "time"),
                    help="the timed loop's rule (bench.stop): ci (default) or time (fixed loop)")
    ap.add_argument("--min-time", type=float, default=0.1, help="the fixed loop's seconds")
    args = ap.parse_args()
    BENCH.update(stop=args.stop, min_time=args.min_time)
    if args.sampled:
        if not args.cpu:
            ap.error("--sampled is a CPU-mode problem: add --cpu")
        CPU_PROBLEM[0] = "relu_sampled_problem.py"
    global ID_BASE
    ID_BASE = args.id_base
    device = "cpu" if args.cpu else 0
    if args.before:
        if not os.path.isdir(os.path.join(args.before, "kagent_eval")):
            ap.error("--before %s: no kagent_eval there (give a copy's src/gpu/eval)" % args.before)
        tables = before_after(device, args.cpu, args.n, args.before)
        if os.environ.get("OUT"):
            with open(os.path.join(os.environ["OUT"], "eval_latency_before_after%s.json" % args.tag), "w") as f:
                json.dump(tables, f, indent=1)
        return
    w = Worker(device)
    first = one(w, 0, args.cpu)  # reference outputs and Triton's disk cache warm up here
    print("first job: %.3f s %s" % (first["wall_s"], first.get("stage_s")), flush=True)
    warm = []
    for i in range(args.n):
        warm.append(one(w, i + 1, args.cpu))
        print("warm job %d: %.3f s" % (i, warm[-1]["wall_s"]), flush=True)
    paced = []
    for i in range(args.n if args.gap > 0 else 0):
        time.sleep(args.gap)  # as when jobs come one LLM reply apart: the spare is ready
        paced.append(one(w, 300 + i, args.cpu))
        print("paced job %d: %.3f s" % (i, paced[-1]["wall_s"]), flush=True)
    w.close()
    nospare = warm_rows(device, args.cpu, args.n, 200, {"KAGENT_EVAL_SPARE": "0"}) if args.nospare else []
    nosandbox = warm_rows(device, args.cpu, args.n, 400, {"KAGENT_EVAL_SANDBOX": "0"}) if args.nosandbox else []
    fresh = []
    for i in range(max(2, args.n // 2) if args.fresh is None else args.fresh):
        t0 = time.perf_counter()
        fw = Worker(device)
        r = one(fw, 100 + i, args.cpu)
        fw.close()
        r["wall_s"] = time.perf_counter() - t0
        r["overhead_s"] = r["wall_s"] - r["loop_s"]
        fresh.append(r)
    med = lambda rows, k: statistics.median(x[k] for x in rows) if rows else float("nan")
    out = {"device": str(device), "first_job": first, "warm": warm, "fresh": fresh, "nospare": nospare,
           "nosandbox": nosandbox, "paced": paced, "gap_s": args.gap,
           "warm_wall_median_s": med(warm, "wall_s"), "warm_overhead_median_s": med(warm, "overhead_s"),
           "fresh_wall_median_s": med(fresh, "wall_s"), "fresh_overhead_median_s": med(fresh, "overhead_s")}
    out["ratio_fresh_over_warm_overhead"] = out["fresh_overhead_median_s"] / max(1e-9, out["warm_overhead_median_s"])
    print("first job (cold reference): %.3f s  ok=%s" % (first["wall_s"], first["ok"]))
    print("%-8s %8s %10s %10s" % ("mode", "n", "wall_s", "overhead_s"))
    print("%-8s %8d %10.3f %10.3f" % ("warm", len(warm), out["warm_wall_median_s"], out["warm_overhead_median_s"]))
    print("%-8s %8d %10.3f %10.3f" % ("fresh", len(fresh), out["fresh_wall_median_s"], out["fresh_overhead_median_s"]))
    if paced:
        out["paced_wall_median_s"] = med(paced, "wall_s")
        out["paced_overhead_median_s"] = med(paced, "overhead_s")
        out["paced_stage_median_s"] = stage_medians(paced)
        print("%-8s %8d %10.3f %10.3f" % ("paced", len(paced), out["paced_wall_median_s"],
                                          out["paced_overhead_median_s"]))
    if nospare:
        out["nospare_wall_median_s"] = med(nospare, "wall_s")
        out["nospare_overhead_median_s"] = med(nospare, "overhead_s")
        print("%-8s %8d %10.3f %10.3f" % ("nospare", len(nospare), out["nospare_wall_median_s"],
                                          out["nospare_overhead_median_s"]))
    if nosandbox:
        out["nosandbox_wall_median_s"] = med(nosandbox, "wall_s")
        out["nosandbox_overhead_median_s"] = med(nosandbox, "overhead_s")
        out["ratio_sandbox_over_nosandbox_wall"] = out["warm_wall_median_s"] / out["nosandbox_wall_median_s"]
        print("%-8s %8d %10.3f %10.3f" % ("nosandbox", len(nosandbox), out["nosandbox_wall_median_s"],
                                          out["nosandbox_overhead_median_s"]))
        print("sandbox/no-sandbox warm wall ratio: %.2fx" % out["ratio_sandbox_over_nosandbox_wall"])
    print("fresh/warm overhead ratio: %.1fx" % out["ratio_fresh_over_warm_overhead"])
    out["warm_stage_median_s"] = stage_medians(warm)
    print("warm job stages, median (s):", out["warm_stage_median_s"],
          "prepared=%s prepare_s=%s warmed=%s" % (warm[-1]["prepared"], warm[-1]["prepare_s"],
                                                  warm[-1]["warmed"]))
    out["warm_timeline_median_s"] = {k: round(statistics.median(r["timeline"].get(k, 0.0) for r in warm), 3)
                                     for k in sorted({k for r in warm for k in r["timeline"]},
                                                     key=lambda k: warm[0]["timeline"].get(k, 0.0))}
    print("warm job timeline, median (s from the job's start):", out["warm_timeline_median_s"])
    if paced:
        print("paced job stages, median (s):", out["paced_stage_median_s"])
    if nospare:
        out["nospare_stage_median_s"] = stage_medians(nospare)
        print("no-spare job stages, median (s):", out["nospare_stage_median_s"])
    out["warm_phase_median_s"] = print_phases("warm (bench.stop=%s)" % args.stop, warm)
    if fresh:
        print("fresh job stages (s):", {k: round(v, 3) for k, v in (fresh[-1]["stage_s"] or {}).items()},
              "reference_s=%.3f" % (fresh[-1]["reference_s"] or 0))
    every = warm + fresh + nospare + nosandbox + paced
    if not all(r["ok"] for r in every):
        print("some jobs failed:", [r["error"] for r in every if not r["ok"]])
    if os.environ.get("OUT"):
        name = "eval_latency%s.json" % ("_" + args.tag if args.tag else "")
        with open(os.path.join(os.environ["OUT"], name), "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
