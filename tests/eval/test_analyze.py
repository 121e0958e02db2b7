"""The `analyze` op (agents/fuse.lua's static analysis) through a real CPU-mode worker, and the
source merging it does, in-process (parse only)."""
import os
import sys
import unittest

from worker_client import CpuWorkerTest, ROOT

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.analyze import source_merge  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples", "problems")
FUSE = os.path.join(ROOT, "tests", "fixtures", "fuse", "problems")


def by_name(result):
    return {op["name"]: op for op in result["ops"]}


class AnalyzeProblem(CpuWorkerTest):
    def analyze(self, **job):
        reply = self.w.request("analyze", job, timeout=300)
        self.assertTrue(reply["ok"], reply)
        return reply["result"]

    def test_gemm_epilogue_graph(self):
        r = self.analyze(problem=os.path.join(EXAMPLES, "l2_gemm_bias_gelu_scale_small.py"))
        self.assertTrue(r["ok"] and r["traced"] and r["decomposable"], r.get("unsupported"))
        self.assertIs(r["functional_check"], True)
        self.assertEqual([o["name"] for o in r["ops"]], ["gemm", "add", "gelu", "mul"])
        ops = by_name(r)
        self.assertEqual(ops["gemm"]["category"], "gemm")
        self.assertEqual(ops["gemm"]["expr"], "torch.nn.functional.linear(${v:x}, ${p:gemm.weight}, None)")
        self.assertEqual(ops["add"]["expr"], "(${v:gemm} + ${p:bias})")
        self.assertEqual(ops["add"]["params"], ["bias"])
        self.assertEqual(ops["mul"]["expr"], "(${v:gelu} * 0.5)", "the scale attribute is a constant")
        self.assertEqual(ops["mul"]["shape"], [16, 32])
        self.assertEqual(r["inputs"][0]["name"], "x")
        self.assertAlmostEqual(r["inputs"][0]["std"], 1.0, delta=0.3)
        self.assertEqual(r["outputs"], ["mul"])
        self.assertEqual(r["params"]["gemm.weight"]["shape"], [32, 64])
        self.assertEqual(r["param_count"], 32 * 64 + 32)

    def test_conv_batchnorm_relu_in_training_mode(self):
        r = self.analyze(problem=os.path.join(EXAMPLES, "l2_conv_bn_relu_small.py"))
        self.assertTrue(r["decomposable"], r.get("unsupported"))
        ops = by_name(r)
        self.assertTrue(ops["conv"]["expr"].startswith("torch.nn.functional.conv2d(${v:x}, ${p:conv.weight}, "
                                                       "${p:conv.bias}, (1, 1), (1, 1), (1, 1), 1)"))
        self.assertIn("batch_norm(${v:conv}, None, None, ${p:bn.weight}, ${p:bn.bias}, True", ops["bn"]["expr"],
                      "training mode: batch statistics, running statistics untouched")
        self.assertEqual(ops["relu"]["module_ctor"], "torch.nn.ReLU()")
        self.assertEqual(ops["bn"]["category"], "norm")

    def test_mlp_keeps_nested_parameter_names(self):
        r = self.analyze(problem=os.path.join(EXAMPLES, "l3_mlp_small.py"))
        self.assertTrue(r["decomposable"])
        self.assertEqual(len(r["ops"]), 7)
        self.assertIn("${p:network.2.weight}", by_name(r)["network_2"]["expr"])
        self.assertEqual(r["used_params"][0], "network.0.weight")

    def test_shapes_are_folded_and_tuples_are_values(self):
        r = self.analyze(problem=os.path.join(FUSE, "shapes.py"))
        self.assertTrue(r["decomposable"], r.get("unsupported"))
        self.assertIs(r["functional_check"], True)
        self.assertEqual(r["placeholders"], [{"name": "x", "tensor": True}, {"name": "scale", "tensor": False}])
        self.assertIn("size", r["folded"])
        ops = by_name(r)
        self.assertFalse(ops["split"]["tensor"])
        self.assertEqual(ops["view"]["expr"], "${v:cat}.view(5, -1)", "x.size(0) folded into 5")
        self.assertEqual(ops["mul"]["expr"], "(${v:bn} * 2.0)", "a Python input folded")
        self.assertIn("${p:bn.running_mean}, ${p:bn.running_var}", ops["bn"]["expr"], "eval mode: running statistics")
        self.assertEqual(ops["soft"]["module_ctor"], "torch.nn.Softmax(dim=-1)")

    def test_what_cannot_be_split_is_named(self):
        r = self.analyze(problem=os.path.join(FUSE, "unsupported.py"))
        self.assertTrue(r["traced"])
        self.assertFalse(r["decomposable"])
        reasons = "\n".join(u["reason"] for u in r["unsupported"])
        self.assertIn("`bil` (Bilinear) is called with more than its input", reasons)
        self.assertIn("in-place `relu_` writes a value that other ops read", reasons)
        self.assertIn("`_tensor_constant0` is neither a parameter nor a buffer", reasons)
        self.assertIn("depends on tensor data (item)", reasons)

    def test_control_flow_is_not_traced(self):
        r = self.analyze(problem=os.path.join(FUSE, "control_flow.py"))
        self.assertTrue(r["ok"])
        self.assertFalse(r["traced"])
        self.assertTrue(r["control_flow"])
        self.assertIn("control flow", r["trace_error"])
        self.assertEqual(r["module_types"], ["Linear", "Model"])

    def test_forward_hot_path(self):
        problem = os.path.join(EXAMPLES, "l2_gemm_bias_gelu_scale_small.py")
        clean = COMPOSED.replace("EXTRA", "")
        r = self.analyze(kind="forward", problem=problem, candidate=clean)
        self.assertTrue(r["traced"], r)
        self.assertEqual(r["foreign"], [])
        self.assertEqual(r["kernel_calls"], 2, r["calls"])
        dirty = COMPOSED.replace("EXTRA", ".contiguous() * 1.0")
        r = self.analyze(kind="forward", problem=problem, candidate=dirty)
        self.assertEqual(sorted(c["target"] for c in r["foreign"]), [".contiguous", "mul"])
        r = self.analyze(kind="forward", problem=problem, candidate="def kernel_function(x):\n    return x\n")
        self.assertFalse(r["traced"])

    def test_inductor_needs_a_gpu(self):
        sub = os.path.join(FUSE, sorted(os.listdir(FUSE))[0])
        for layout in ("inductor", "eager"):
            r = self.analyze(kind="inductor", problem=sub, layout=layout)
            self.assertFalse(r["ok"])
            self.assertTrue(r["error"].startswith("ENOTSUP"), r)

    def test_merge_through_the_worker_and_bad_requests(self):
        r = self.analyze(kind="merge", parts=[{"prefix": "a_", "source": "def kernel_function(x):\n    return x\n"}])
        self.assertTrue(r["ok"])
        self.assertEqual(r["entries"], [{"kind": "kernel_function", "name": "a_kernel_function"}])
        sub = os.path.join(FUSE, sorted(os.listdir(FUSE))[0])
        for job in ({"kind": "nope"}, {"kind": "merge", "parts": []}, {"problem": "/nonexistent.py"},
                    {"kind": "inductor", "problem": sub, "layout": "nchw"},
                    {"kind": "inductor", "problem": sub, "library": "maybe"}):
            reply = self.w.request("analyze", job, timeout=60)
            self.assertFalse(reply["ok"])
            self.assertTrue(reply["error"].startswith("EBADREQ"), reply)


# a composed program: two own kernels; EXTRA puts torch ops on the hot path
COMPOSED = '''
import torch


class K(torch.nn.Module):
    def forward(self, x, w):
        return torch.relu(x @ w.t())


def scale(x):
    return x * 0.5


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.gemm = torch.nn.Module()
        self.gemm.weight = torch.nn.Parameter(torch.empty(32, 64))
        self.k = K()

    def forward(self, x):
        return scale(self.k(x, self.gemm.weight))EXTRA
'''


class Merge(unittest.TestCase):
    def merge(self, *sources):
        return source_merge.merge([{"prefix": "p%d_" % i, "source": s, "label": str(i)}
                                   for i, s in enumerate(sources)])

    def test_names_follow_python_scopes(self):
        src = (
            "import torch\n"
            "BLOCK = 4  # kept comment\n"
            "def helper(x, BLOCK=BLOCK):\n"
            "    y = [BLOCK for BLOCK in range(2)]\n"
            "    return x * BLOCK, y\n"
            "class ModelNew(torch.nn.Module):\n"
            "    SIZE = BLOCK\n"
            "    def forward(self, x):\n"
            "        global calls\n"
            "        calls = calls + 1\n"
            "        return helper(x)[0] + self.SIZE, f'{BLOCK}'\n"
            "calls = 0\n")
        r = self.merge(src, src.replace("BLOCK = 4", "BLOCK = 8"))
        self.assertTrue(r["ok"], r)
        out = r["source"]
        self.assertEqual(out.count("import torch"), 1, "imports hoisted once")
        self.assertIn("p0_BLOCK = 4  # kept comment", out)
        self.assertIn("def p0_helper(x, BLOCK=p0_BLOCK):", out, "a parameter of the same name is left alone")
        self.assertIn("[BLOCK for BLOCK in range(2)]", out)
        self.assertIn("return x * BLOCK, y", out)
        self.assertIn("SIZE = p0_BLOCK", out)
        self.assertIn("global p0_calls", out)
        self.assertIn("f'{p0_BLOCK}'", out)
        self.assertIn("p1_BLOCK = 8", out)
        self.assertEqual(r["entries"], [{"kind": "ModelNew", "name": "p0_ModelNew"},
                                        {"kind": "ModelNew", "name": "p1_ModelNew"}])
        ns = {}
        exec(compile(out.replace("import torch\n", "").replace("(torch.nn.Module)", ""), "merged", "exec"), ns)
        self.assertEqual(ns["p0_ModelNew"]().forward(1), (4 + 4, "4"))
        self.assertEqual(ns["p1_ModelNew"]().forward(1), (8 + 8, "8"))
        self.assertEqual((ns["p0_calls"], ns["p1_calls"]), (1, 1))

    def test_refuses_what_cannot_be_joined(self):
        r = self.merge("import numpy as np\ndef kernel_function(x):\n    return x\n",
                       "import jax.numpy as np\ndef kernel_function(x):\n    return x\n")
        self.assertIn("import different things as `np`", r["error"])
        self.assertIn("neither ModelNew nor kernel_function", self.merge("x = 1\n")["error"])
        self.assertIn("does not parse", self.merge("def f(:\n")["error"])
        same = self.merge("import torch.nn as nn\ndef kernel_function(x):\n    return x\n",
                          "from torch import nn\ndef kernel_function(x):\n    return x\n")
        self.assertTrue(same["ok"], "two ways to bind nn to torch.nn")


if __name__ == "__main__":
    unittest.main()
