#!/usr/bin/env python3
"""GPU check of the reviewer's extra trials (src/gpu/eval/kagent_eval/common/extra_trials.py; docs/agents.md,
"The reviewer") on Triton kernels of tests/fixtures/eval/review/gpu_problem.py (a leaky ReLU over
a (batch_size, dim) input).

    python3 tests/gpu/review_gpu_check.py [--parts eval,agent]

eval: a GPU worker's jobs with the inputs a reviewer proposes. A kernel that indexes its input's
  storage as if contiguous, and one that keeps its first call's size, pass the regular trials and
  are refused (EREVIEW) through a transposed / strided input and a second call with a larger
  batch; a correct kernel passes the same proposals; a proposal outside the problem's contract is
  refused and judges nothing.
agent: agents/beam.lua on the GPU (KAGENT_BIN, else build/kagent-rt, else .devbuild/bin/kagent-rt)
  with the FAKE LLM server (tests/fixtures/fake_llm/server.py) as its only model and
  --review finalists: the optimizer's rewrite is the contiguous-only kernel (faster than the
  two-pass start kernel), the scripted reviewer proposes a transposed input; the rewrite must be
  refused with that input stored, and the run must end verified on the correct start kernel.

Prints one line per check, then RESULT: PASS or FAIL; writes JSON to $OUT/review_gpu_check.json
when OUT is set. Exit status: 0 all passed, 1 a check failed, 77 skipped (no CUDA here).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "eval"))
from worker_client import Worker, fixture, have_cuda  # noqa: E402
from check_table import Checks  # noqa: E402

PROBLEM = fixture("eval", "review", "gpu_problem.py")
TRANSPOSED = {"id": "transposed", "why": "the kernel ignores strides",
              "calls": [{"inputs": [{"layout": "transposed", "values": "signed"}]}]}
STRIDED = {"id": "strided", "calls": [{"inputs": [{"layout": "strided"}]}]}
BIGGER = {"id": "bigger", "why": "a second call with a larger batch",
          "calls": [{"sizes": {"batch_size": 1024}}, {"sizes": {"batch_size": 4096}}]}
OUTSIDE = {"id": "outside", "calls": [{"sizes": {"nope": 3}}]}
REVIEW_TITLE = "# REVIEW: INPUTS THAT SHOULD BREAK THIS KERNEL"  # prompts/review.md


def kernel(name):
    return fixture("eval", "review", name)


def part_eval(c):
    # the first GPU of CUDA_VISIBLE_DEVICES, as the agent part's pool takes it (a worker's device
    # is a mask entry)
    w = Worker(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0")
    try:
        for name in ("gpu_contiguous_only.py", "gpu_first_batch.py", "gpu_correct.py", "gpu_two_pass.py"):
            r = w.job("verify", PROBLEM, kernel(name))
            c.add("eval", "%s passes the regular trials" % name, r.get("ok"), r.get("error") or "ok")
        for proposal in (TRANSPOSED, STRIDED):
            r = w.job("verify", PROBLEM, kernel("gpu_contiguous_only.py"), extra_trials=[proposal])
            failed = (r.get("review") or {}).get("failed") or {}
            c.add("eval", "contiguous-only refused through a %s input" % proposal["id"],
                  r.get("code") == "EREVIEW" and failed.get("id") == proposal["id"],
                  (r.get("error") or "accepted")[:200])
        r = w.job("benchmark", PROBLEM, kernel("gpu_first_batch.py"), extra_trials=[BIGGER])
        failed = (r.get("review") or {}).get("failed") or {}
        c.add("eval", "first-batch refused on a second call with a larger batch",
              r.get("code") == "EREVIEW" and (failed.get("id"), failed.get("call")) == ("bigger", 2),
              (r.get("error") or "accepted")[:200])
        r = w.job("benchmark", PROBLEM, kernel("gpu_correct.py"),
                  extra_trials=[TRANSPOSED, STRIDED, BIGGER, OUTSIDE])
        review = r.get("review") or {}
        c.add("eval", "the correct kernel passes the same proposals",
              r.get("ok") and review.get("passed") == ["transposed", "strided", "bigger"],
              "median %s ms; %s" % ((r.get("time_ms") or {}).get("median"), r.get("error") or "ok"))
        refused = [x.get("id") for x in review.get("refused") or []]
        c.add("eval", "a proposal outside the contract is refused, not the kernel", refused == ["outside"],
              "; ".join(x.get("reason", "") for x in review.get("refused") or [])[:200])
    finally:
        w.close()


def fenced(value):
    return "```json\n" + json.dumps(value) + "\n```"


def agent_script():
    with open(kernel("gpu_contiguous_only.py")) as f:
        rewrite = f.read()
    bottleneck = {"category": "memory", "summary": "DIRECTION_1: two passes over the output",
                  "reasoning": "the output is written twice", "skill": "fusion",
                  "root_causes": [{"cause": "two kernels", "evidence": []}],
                  "recommended_fixes": [{"fix": "one pass", "rationale": "write y once"}]}
    reflexion = {"was_diagnosis_correct": True, "was_fix_effective": True, "expected_outcome": "faster",
                 "actual_outcome": "measured", "reasoning": "scripted", "lessons": [],
                 "avoid_patterns": [], "try_patterns": []}
    return {"latency": 0, "replies": [
        {"match": REVIEW_TITLE, "text": fenced({"proposals": [TRANSPOSED]})},
        {"match": "# BOTTLENECK ANALYSIS", "text": fenced({"bottlenecks": [bottleneck]})},
        {"match": "# REFLEXION", "text": fenced(reflexion)},
        {"match": "DIRECTION_1:", "text": "One pass.\n```python\n" + rewrite + "```\n"}]}


def binary():
    for path in (os.environ.get("KAGENT_BIN"), os.path.join(ROOT, "build", "kagent-rt"),
                 os.path.join(ROOT, ".devbuild", "bin", "kagent-rt")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def part_agent(c):
    bin_path = binary()
    if not bin_path:
        c.add("agent", "kagent-rt found", False, "set KAGENT_BIN")
        return
    tmp = tempfile.mkdtemp(prefix="kagent-review-gpu-")
    server = None
    try:
        script = os.path.join(tmp, "script.json")
        with open(script, "w") as f:
            json.dump(agent_script(), f)
        server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "fixtures", "fake_llm", "server.py"),
                                   "--port", "0", "--script", script], stdout=subprocess.PIPE, text=True)
        port = json.loads(server.stdout.readline())["port"]
        env = dict(os.environ, KAGENT_LLM_URL="http://127.0.0.1:%d/v1" % port, KAGENT_MODEL="openai:fake",
                   OPENAI_API_KEY="fake-key", KAGENT_DB=os.path.join(tmp, "mem.db"), KAGENT_PROGRESS="lines",
                   KAGENT_PYTHON=sys.executable)
        for key in ("ANTHROPIC_API_KEY", "KAGENT_LLM_CACHE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
            env.pop(key, None)
        p = subprocess.run([bin_path, "--env-file", "/dev/null", "agents/beam.lua", "--problem", PROBLEM,
                            "--kernel", kernel("gpu_two_pass.py"), "--rounds", "1", "--directions", "1",
                            "--refine", "0", "--review", "finalists", "--out", os.path.join(tmp, "runs")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
        c.add("agent", "beam.lua --review finalists exits 0", p.returncode == 0, p.stderr[-300:].replace("\n", " | "))
        runs = sorted(os.listdir(os.path.join(tmp, "runs"))) if os.path.isdir(os.path.join(tmp, "runs")) else []
        runs = [r for r in runs if os.path.isdir(os.path.join(tmp, "runs", r))]
        if not runs:
            c.add("agent", "a run folder", False, "none")
            return
        rd = os.path.join(tmp, "runs", runs[-1])
        with open(os.path.join(rd, "summary.json")) as f:
            s = json.load(f)
        review = s.get("review") or {}
        refused = {k.get("kernel"): k for k in review.get("refused_kernels") or []}
        c.add("agent", "the rewrite is refused through the reviewer's transposed input",
              "r1w1" in refused and "reviewer input transposed" in str(refused["r1w1"].get("error")),
              str(refused.get("r1w1"))[:200])
        c.add("agent", "the input joins the problem's trials", review.get("inputs_added") == 1
              and os.path.isfile(os.path.join(rd, "review", "inputs.json")), "inputs_added %s" % review.get("inputs_added"))
        c.add("agent", "the run ends verified on the correct start kernel",
              s.get("verified") is True and (s.get("best") or {}).get("id") == "input",
              "best %s, %s ms" % ((s.get("best") or {}).get("id"), s.get("best_ms")))
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="eval,agent")
    args = ap.parse_args()
    if not have_cuda():
        print("SKIP: no CUDA device here")
        return 77
    c = Checks("review_gpu_check.json")
    for name in args.parts.split(","):
        {"eval": part_eval, "agent": part_agent}[name](c)
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
