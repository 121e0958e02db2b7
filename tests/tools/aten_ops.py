"""The ATen ops a problem's Model and a candidate's ModelNew run, in order, on the same inputs
(TorchDispatchMode records every op at dispatch): what the CPU tests of agents/fuse.lua compare
to show that a program composed of the reference's own operations adds no op and no copy.
    python3 tests/tools/aten_ops.py PROBLEM CANDIDATE   -> JSON {"reference": [...], "candidate": [...]}
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "gpu", "eval"))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from kagent_eval.common import inputs, loader  # noqa: E402


class Record(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def ops_of(fn, args):
    rec = Record()
    with torch.no_grad(), rec:
        fn(*args)
    return rec.ops


def main(problem_path, candidate_path):
    problem = loader.load_module("problem", problem_path)
    cand = loader.load_module("candidate", candidate_path)
    init = list(problem.get_init_inputs())
    ref = loader.build_model(torch, problem.Model, init, 42, torch.float32, "cpu")
    new = loader.build_candidate(torch, cand, ref, init, 42, torch.float32, "cpu")
    args, _ = inputs.make_inputs(torch, problem, 42, 0, torch.float32, "cpu", "own")
    print(json.dumps({"reference": ops_of(ref, args), "candidate": ops_of(new, args)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
