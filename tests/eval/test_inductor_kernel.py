"""The standalone kernel file made of TorchInductor's emitted module (inductor_kernel.standalone),
without a GPU: a module shaped as Inductor emits one (written here), made standalone and run
against a FAKE Inductor compile (tests/gpu/levels23_gpu_check.sh runs the real one)."""
import os
import sys
import types
import unittest
from unittest import mock

from worker_client import ROOT

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval import inductor_kernel, static_checks  # noqa: E402

# the shape of Inductor's output code: imports, kernels handed to async_compile at import, a
# wait, call(args), and a benchmark harness at the end
EMITTED = '''
import torch
from torch._inductor.async_compile import AsyncCompile

async_compile = AsyncCompile()

triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', "source")

async_compile.wait(globals())
del async_compile


def call(args):
    a, b = args
    args.clear()
    return (triton_poi_fused_add_0(a, b), )


def benchmark_compiled_module(times=10, repeat=10):
    return 0.0


if __name__ == "__main__":
    benchmark_compiled_module()
'''


class Standalone(unittest.TestCase):
    def test_the_file_is_the_module_without_its_harness_behind_a_kernel_function(self):
        made = inductor_kernel.standalone(EMITTED, 2, 1, "2.x", {"library": "allow"})
        self.assertTrue(made["ok"], made)
        calls = []

        class AsyncCompile:  # FAKE: Inductor's compile, returning an adding kernel
            def triton(self, name, source):
                return lambda a, b: calls.append(name) or a + b

            def wait(self, scope):
                pass

        fake = types.ModuleType("torch._inductor.async_compile")
        fake.AsyncCompile = AsyncCompile
        scope = {"__name__": "candidate"}
        with mock.patch.dict(sys.modules, {"torch._inductor.async_compile": fake}):
            exec(compile(made["source"], "candidate.py", "exec"), scope)
        self.assertEqual(scope["kernel_function"](2, 3), 5)
        self.assertEqual(calls, ["triton_poi_fused_add_0"])
        self.assertNotIn("benchmark_compiled_module", scope)
        self.assertEqual(static_checks.scan(made["source"]), [], "the evaluator's static checks pass it")

    def test_the_harness_is_cut_and_the_counts_reported(self):
        made = inductor_kernel.standalone(EMITTED, 2, 1, "2.x", {"library": "deny", "layout": "eager"})
        self.assertNotIn("benchmark_compiled_module", made["source"])
        self.assertNotIn("__main__", made["source"])
        self.assertIn("denied (Triton templates); eager's layouts kept", made["source"])
        self.assertEqual((made["triton_kernels"], made["extern_calls"]), (1, 0))

    def test_several_outputs_are_returned_as_a_tuple(self):
        made = inductor_kernel.standalone(EMITTED, 3, 2, "2.x", {})
        self.assertIn("def kernel_function(x0, x1, x2):", made["source"])
        self.assertIn("return tuple(outs[:2])", made["source"])

    def test_a_module_without_call_is_refused(self):
        made = inductor_kernel.standalone("import torch\n", 1, 1, "2.x", {})
        self.assertFalse(made["ok"])
        self.assertTrue(made["error"].startswith("EINDUCTOR"))


if __name__ == "__main__":
    unittest.main()
