"""GPU check of the compiled fingerprint (exits 77 = skipped without a GPU or Triton): a Triton
kernel compiled in two fresh processes, each from its own temporary file and with its own Triton
cache, must give one fingerprint, or a confirmation never finds the verdicts kept for it
(agents/search/confirm.lua); the same kernel with one constant changed must give another.
Prints each process's fingerprint and the hash of its raw PTX (which names the file).
Usage: python3 tests/gpu/compiled_fingerprint_gpu_check.py"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "gpu", "eval"))
sys.path.insert(0, os.path.join(HERE, "..", "eval"))

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + ADDEND, mask=mask)


def run():
    x = torch.arange(4096, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    add_kernel[(4,)](x, out, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    return out
'''

CHILD = '''
import hashlib, json, sys
from kagent_eval import fingerprint, loader
module = loader.load_module("candidate", sys.argv[1])
module.run()
raw = sorted(fingerprint.compiled_ptx(module))
print(json.dumps({"file": module.__file__, "fingerprint": fingerprint.of_module(module),
                  "raw_ptx_sha": hashlib.sha256("".join(raw).encode()).hexdigest()[:16]}))
'''


def compile_in_fresh_process(source):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache,
                   PYTHONPATH=os.path.join(HERE, "..", "..", "src", "gpu", "eval"))
        proc = subprocess.run([sys.executable, "-c", CHILD, source], env=env, capture_output=True,
                              text=True, timeout=300)
    if proc.returncode != 0:
        sys.exit("FAIL: the child failed: " + proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    from worker_client import have_cuda
    if not (have_cuda() and importlib.util.find_spec("triton")):
        print("SKIP: no CUDA device or no Triton")
        return 77
    same = KERNEL.replace("ADDEND", "1.0")
    runs = [compile_in_fresh_process(same) for _ in range(2)]
    other = compile_in_fresh_process(KERNEL.replace("ADDEND", "2.0"))
    for name, r in (("first", runs[0]), ("second", runs[1]), ("changed", other)):
        print("%-8s file %s  fingerprint %s  raw PTX sha %s" % (name, r["file"], r["fingerprint"],
                                                                r["raw_ptx_sha"]))
    bad = []
    if not runs[0]["fingerprint"]:
        bad.append("no fingerprint: Triton's PTX was not found on the module")
    if runs[0]["fingerprint"] != runs[1]["fingerprint"]:
        bad.append("the same kernel from two files has two fingerprints")
    if other["fingerprint"] == runs[0]["fingerprint"]:
        bad.append("a changed constant left the fingerprint as it was")
    for b in bad:
        print("FAIL", b)
    print("RESULT:", "FAIL" if bad else "PASS")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
