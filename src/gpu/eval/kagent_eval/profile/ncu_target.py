"""The program `ncu` profiles: load a problem and a candidate, warm up, then run exactly one
forward between cudaProfilerStart and cudaProfilerStop (ncu runs with --profile-from-start off,
so warm-up and Triton compilation are not profiled).

    python3 -m kagent_eval.profile.ncu_target job.json
job: {"problem": path, "candidate": path or null (profile the reference), "dtype": "bf16",
      "seed": 0, "device": 0, "warmup": 2, "preroll": 0, "shrink": null, "report": null}
"shrink": run the problem about that many times smaller (inputs.shrunk_sizes; compute-sanitizer's
racecheck, sanitizer.py). "report": a file to write {"sizes": the changed size constants,
"compiled": the candidate's compiled fingerprint} to once the forward has run.
"preroll": tiny fill kernels launched inside the profiled range before the forward, so that
whatever the profiler does at the start of a pass is charged to them (the caller drops them).
Prints nothing on stdout (ncu's CSV goes there); exit 0 on success.
"""
import json
import os
import sys


def build_forward(job):
    """(torch, zero-argument forward, what it ran: {"sizes", "module"}) for the job, on its
    device, inputs cast to its dtype."""
    import torch
    from ..child import ext_build
    from ..common import loader
    from ..common.inputs import make_inputs, shrunk_sizes

    device = "cuda:%d" % int(job.get("device", 0))
    torch.cuda.set_device(device)
    dtype = loader.torch_dtype(torch, job.get("dtype", "bf16"))
    seed = int(job.get("seed", 0))
    problem = loader.load_module("problem", job["problem"])
    init_inputs = [loader.cast_value(torch, v, dtype, device) for v in problem.get_init_inputs()]
    ref = loader.build_model(torch, problem.Model, init_inputs, seed, dtype, device)
    # The evaluator's first trial: generated on the device, so ncu's process does not spend
    # seconds making a multi-GB input on the CPU.
    sizes = shrunk_sizes(problem, int(job["shrink"])) if job.get("shrink") else {}
    inputs, _ = make_inputs(torch, problem, seed, 0, dtype, device, sizes=sizes or None)
    module = None
    if job.get("candidate"):
        if ext_build.uses_load_inline(loader.source_of(job["candidate"])[0]):
            # its builds, from the job's extension cache (the compile step's: child_compile.py),
            # under the same key: this GPU's architecture as the step named it
            os.environ.setdefault("TORCH_CUDA_ARCH_LIST",
                                  "%d.%d" % torch.cuda.get_device_capability(device))
            ext_build.install(torch, [])
        module = loader.load_module("candidate", job["candidate"])
        model = loader.build_candidate(torch, module, ref, init_inputs, seed, dtype, device)
    else:
        model = ref

    def forward():
        with torch.no_grad():
            return model(*inputs)

    return torch, forward, {"sizes": sizes, "module": module}


def write_report(path, ran):
    from ..common import fingerprint
    with open(path, "w") as f:
        json.dump({"sizes": ran["sizes"],
                   "compiled": fingerprint.of_module(ran["module"]) if ran["module"] else None}, f)


def main(argv):
    with open(argv[1]) as f:
        job = json.load(f)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # keep ncu's CSV on stdout clean of the candidate's prints
    try:
        torch, forward, ran = build_forward(job)
        for _ in range(int(job.get("warmup", 2))):
            forward()
        torch.cuda.synchronize()
        preroll = int(job.get("preroll", 0))
        scratch = torch.empty(1, device=torch.cuda.current_device()) if preroll else None
        torch.cuda.profiler.start()
        for _ in range(preroll):
            scratch.fill_(0.0)
        forward()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        if job.get("report"):
            write_report(job["report"], ran)
    finally:
        sys.stdout = real_stdout
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
