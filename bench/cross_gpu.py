#!/usr/bin/env python3
"""What one GPU's work does to another's on the same host: each piece of a job's GPU work timed on
GPU 0 alone, while GPU 1 does the same piece, and while GPU 1 churns (CUDA contexts created and
destroyed, large allocations made and freed: what a pool's spares and finished candidates do).

    python3 bench/cross_gpu.py [--only loop,profile] [--churn context|spare] [--gpus 0,1]
                               [--json out.json]

The pieces: a loop of 200 small matmuls (plain, and under the all-stream activity trace), the
trace's start and stop around one kernel, an 8 GiB allocation and its release, one `sol` profile
(CUPTI range profiler), a fresh Triton compile and load, a fresh process creating a CUDA context,
and a pure-Python loop (the CPU alone). Each runs in its own process per GPU (CUDA_VISIBLE_DEVICES
set to that GPU), one warm-up rep first. Prints a table of medians and the ratios beside/alone.
`fresh` is a candidate's process in miniature (outside the sandbox): a fresh process with the
evaluator's timer, its steps up to and through 20 timed calls each timed. `--churn spare` has GPU 1
repeat a spare sandbox's preparation instead. `--gpus 0,0` puts both sides on one GPU (without
`profile`: one GPU profiles for one process at a time). Needs two GPUs unless both sides share
one; prints SKIP and exits 77 otherwise.
"""
import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

# piece: reps measured per mode
PIECES = {"cpu": 10, "loop": 20, "traced_loop": 20, "trace_toggle": 20, "alloc": 10,
          "profile": 8, "compile": 6, "context": 4, "fresh": 6}
ALLOC_BYTES = 8 << 30
CONTEXT_CODE = ("import torch; torch.cuda.init(); x = torch.empty(%d, dtype=torch.uint8, "
                "device='cuda'); torch.cuda.synchronize()")

TRITON_SOURCE = '''
import triton
import triton.language as tl

@triton.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * %d.0 + %d.0, mask=m)
'''


class Pieces:
    """One GPU's side: each piece as a function timed by wall clock."""

    def __init__(self):
        import torch
        self.torch = torch
        torch.cuda.set_device(0)
        torch.cuda.init()
        self.a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        self.x = torch.ones(1 << 20, device="cuda")
        self.trace = None
        self.compiled = 0
        self.folder = tempfile.mkdtemp(prefix="cross_gpu_")
        sys.path.insert(0, self.folder)

    def _kernels(self, n):
        events = [(self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True))
                  for _ in range(n)]
        for start, end in events:
            start.record()
            self.a @ self.b
            end.record()
        self.torch.cuda.synchronize()
        return sum(s.elapsed_time(e) for s, e in events)

    def cpu(self):
        total = 0
        for i in range(2_000_000):
            total += i * i
        return total

    def loop(self):
        self._kernels(200)

    def _tracer(self):
        if self.trace is None:
            from kagent_eval.profile import profiler_lib
            self.trace = profiler_lib.activity_trace(0)
        return self.trace

    def traced_loop(self):
        trace = self._tracer()
        trace.begin()
        self._kernels(200)
        trace.end()

    def trace_toggle(self):
        trace = self._tracer()
        trace.begin()
        self._kernels(1)
        trace.end()

    def alloc(self):
        x = self.torch.empty(ALLOC_BYTES, dtype=self.torch.uint8, device="cuda")
        self.torch.cuda.synchronize()
        del x
        self.torch.cuda.empty_cache()

    def profile(self):
        from kagent_eval.profile import profiling
        profiling.profile(lambda: self.a @ self.b, metrics="sol", device_index=0)

    def compile(self):
        # a kernel no cache has seen: another module with other constants each time
        self.compiled += 1
        name = "cross_gpu_k%d_%d" % (os.getpid(), self.compiled)
        with open(os.path.join(self.folder, name + ".py"), "w") as f:
            f.write(TRITON_SOURCE % (self.compiled + 1, self.compiled))
        module = __import__(name)
        module.scale[(self.x.numel() // 1024,)](self.x, self.x.numel(), BLOCK=1024)
        self.torch.cuda.synchronize()

    def context(self):
        subprocess.run([sys.executable, "-c", CONTEXT_CODE % (1 << 20)], check=True)

    def fresh(self):
        """A candidate's process in miniature: a fresh process with the evaluator's Timer, its
        steps before a timed loop each timed (fresh_steps)."""
        out = subprocess.run([sys.executable, __file__, "--fresh-child"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def churn_once(self, kind):
        if kind == "spare":
            subprocess.run([sys.executable, __file__, "--spare-child"], check=True)
        else:
            subprocess.run([sys.executable, "-c", CONTEXT_CODE % ALLOC_BYTES], check=True)


def spare_steps():
    """What a pool's spare sandbox prepares (a CUDA context, the timer, warmup.host: Triton's
    first module loaded, CUPTI set up, the default profile's config image), then its exit."""
    import torch
    from kagent_eval.child import child_common, warmup
    torch.cuda.set_device(0)
    torch.cuda.init()
    child_common.timer(torch, "cuda:0")
    warmup.host(torch)


def fresh_steps():
    """The steps of a candidate's process on a 1 ms matmul, as the evaluator runs them (spare set-up,
    the audit's traced call, then timing.Timer.timed_loop's steps one by one): {step: seconds}."""
    import torch
    from kagent_eval.child import child_common, warmup
    from kagent_eval.profile import profiling
    steps, t = {}, [time.perf_counter()]

    def lap(name):
        now = time.perf_counter()
        steps[name] = now - t[0]
        t[0] = now

    torch.cuda.set_device(0)
    torch.cuda.init()
    timer = child_common.timer(torch, "cuda:0")
    _, state = warmup.host(torch)
    lap("timer_and_spare")
    warmup.on_device(torch, state)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    lap("on_device")

    def call():
        return a @ a
    profiling.trace_kernels(call, 0)
    lap("audit_trace")
    timer.warm(call, 1, 0.0)
    lap("warm_call")
    timer.fit_pad(call)
    lap("fit_pad")
    timer.time_once(call)
    lap("time_once")
    stream = torch.cuda.Stream()
    timer.tracer.stream_id(stream.cuda_stream)
    lap("stream")
    timer.tracer.begin()
    lap("trace_begin")
    for _ in range(20):
        timer.time_once(call)
    lap("calls_20")
    timer.tracer.end()
    lap("trace_end")
    return steps


def serve():
    """A GPU's process: JSON lines in, JSON lines out."""
    cache = os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="cross_gpu_triton_")
    pieces = Pieces()
    try:
        _serve(pieces)
    finally:  # the kernels this side wrote and compiled
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(pieces.folder, ignore_errors=True)


def _serve(pieces):
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "churn":
            n = 0
            while not select.select([sys.stdin], [], [], 0)[0]:
                pieces.churn_once(cmd.get("kind"))
                n += 1
            sys.stdin.readline()
            print(json.dumps({"churned": n}), flush=True)
            continue
        fn = getattr(pieces, cmd["op"])
        fn()  # warm-up
        times, parts = [], []
        for _ in range(cmd["reps"]):
            t0 = time.perf_counter()
            part = fn()
            times.append(time.perf_counter() - t0)
            if isinstance(part, dict):
                parts.append(part)
        print(json.dumps({"times": times, "parts": parts}), flush=True)


class Side:
    def __init__(self, gpu):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu))
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.read()

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("cross_gpu: a GPU's process ended early")
        return json.loads(line)


def _medians(reply):
    """The median time, and of each sub-step where the piece reports them."""
    parts = reply["parts"]
    return statistics.median(reply["times"]), {
        k: statistics.median(p[k] for p in parts) for k in (parts[0] if parts else {})}


def measure(piece, reps, gpu0, gpu1, churn):
    row = {"piece": piece}
    gpu0.send(op=piece, reps=reps)
    row["alone"], row["alone_parts"] = _medians(gpu0.read())
    gpu0.send(op=piece, reps=reps)
    gpu1.send(op=piece, reps=reps)
    row["both"], row["both_parts"] = _medians(gpu0.read())
    row["both_gpu1"], _ = _medians(gpu1.read())
    gpu1.send(op="churn", kind=churn)
    time.sleep(1.0)  # the churn is under way
    gpu0.send(op=piece, reps=reps)
    row["churn"], row["churn_parts"] = _medians(gpu0.read())
    gpu1.send(op="stop")
    row["churned"] = gpu1.read()["churned"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fresh-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spare-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--churn", choices=("context", "spare"), default="context",
                    help="what GPU 1 repeats in the churn column: a context with an 8 GiB "
                         "allocation, or a spare sandbox's preparation (default context)")
    ap.add_argument("--only", default=None, help="comma-separated pieces (default: all)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--gpus", default="0,1",
                    help="the measured GPU and the other one, as CUDA_VISIBLE_DEVICES entries "
                         "(default 0,1; 0,0 puts the other side on the same GPU)")
    args = ap.parse_args()
    if args.serve:
        return serve()
    if args.spare_child:
        spare_steps()
        return 0
    if args.fresh_child:
        print(json.dumps(fresh_steps()))
        return 0
    pieces = args.only.split(",") if args.only else list(PIECES)
    unknown = [p for p in pieces if p not in PIECES]
    if unknown:
        ap.error("unknown pieces: %s (known: %s)" % (", ".join(unknown), ", ".join(PIECES)))
    gpus = args.gpus.split(",")
    if len(gpus) != 2:
        ap.error("--gpus takes two entries")
    import torch
    if torch.cuda.device_count() < len(set(gpus)):
        print("SKIP: cross_gpu needs %s (%d here)" % (
            "two GPUs" if len(set(gpus)) == 2 else "a GPU", torch.cuda.device_count()))
        return 77
    if gpus[0] == gpus[1] and "profile" in pieces:
        # one GPU's profiling hardware serves one process at a time (CUPTI_ERROR_HARDWARE_BUSY)
        print("profile: left out, both sides are on GPU %s" % gpus[0])
        pieces.remove("profile")
    gpu0, gpu1 = Side(gpus[0]), Side(gpus[1])
    rows = []
    for piece in pieces:
        row = measure(piece, PIECES[piece], gpu0, gpu1, args.churn)
        rows.append(row)
        print("%-13s alone %.4f s  both %.4f s (%.2fx)  churn %.4f s (%.2fx, %d churns)" % (
            piece, row["alone"], row["both"], row["both"] / row["alone"], row["churn"],
            row["churn"] / row["alone"], row["churned"]), flush=True)
        for step in row["alone_parts"]:
            print("  %-20s alone %.4f s  both %.4f s  churn %.4f s" % (
                step, row["alone_parts"][step], row["both_parts"][step],
                row["churn_parts"][step]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
