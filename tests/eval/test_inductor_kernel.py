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
from kagent_eval.analyze import inductor_kernel  # noqa: E402
from kagent_eval.judge import static_checks  # noqa: E402

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


def load(source, calls):
    """The standalone file's names, imported against a FAKE of Inductor's compile whose every
    Triton kernel adds its two arguments (and notes its name in `calls`)."""
    class AsyncCompile:
        def triton(self, name, source):
            return lambda a, b: calls.append(name) or a + b

        def wait(self, scope):
            pass

    fake = types.ModuleType("torch._inductor.async_compile")
    fake.AsyncCompile = AsyncCompile
    scope = {"__name__": "candidate"}
    with mock.patch.dict(sys.modules, {"torch._inductor.async_compile": fake}):
        exec(compile(source, "candidate.py", "exec"), scope)
    return scope


class Standalone(unittest.TestCase):
    def test_the_file_is_the_module_without_its_harness_behind_a_kernel_function(self):
        made = inductor_kernel.standalone(EMITTED, 2, 1, "2.x", {"library": "allow"})
        self.assertTrue(made["ok"], made)
        calls = []
        scope = load(made["source"], calls)
        self.assertEqual(scope["kernel_function"](2, 3), 5)
        self.assertEqual(calls, ["triton_poi_fused_add_0"])
        self.assertNotIn("benchmark_compiled_module", scope)
        self.assertEqual(static_checks.scan(made["source"]), [], "the evaluator's static checks pass it")

    def test_an_input_with_other_strides_reaches_call_contiguous(self):
        # call() asserts the strides it was compiled for, a contiguous input's (as Inductor's
        # assert_size_stride does); the composed program may pass a transposed view
        import torch
        emitted = EMITTED.replace("    a, b = args\n", "    a, b = args\n    assert a.is_contiguous() and b.is_contiguous()\n")
        made = inductor_kernel.standalone(emitted, 2, 1, "2.x", {})
        scope = load(made["source"], [])
        a = torch.arange(12.0).reshape(3, 4).t()  # a view with strides (1, 4)
        b = torch.ones(4, 3)
        self.assertFalse(a.is_contiguous())
        self.assertTrue(torch.equal(scope["kernel_function"](a, b), a + 1))
        self.assertEqual(static_checks.scan(made["source"]), [])

    def test_call_takes_the_inputs_in_the_compiled_graphs_order(self):
        # TorchDynamo makes a graph input where the forward first uses an argument: a batch norm
        # reads its running statistics before its weight, so call() may take (x0, p2, p0, p1)
        class Node:  # FAKE: an FX placeholder with TorchDynamo's source of it
            def __init__(self, name, source):
                self.op, self.name = "placeholder", name
                self.meta = {"grapharg": types.SimpleNamespace(source=source)}

        def local(name):  # FAKE: TorchDynamo's LocalSource
            return types.SimpleNamespace(local_name=name)

        class Graph:  # FAKE: the graph module TorchDynamo hands a backend
            def __init__(self, nodes):
                self.graph = types.SimpleNamespace(nodes=nodes)

        seen, names = [], ["x0", "p0_weight", "p1_bias", "p2_running_mean"]
        backend = inductor_kernel.recording(lambda gm, ex: "compiled", seen)
        nodes = [Node("l_x0_", local("x0")), Node("l_p2_running_mean_", local("p2_running_mean")),
                 Node("l_args_1_", types.SimpleNamespace(base=local("args"), index=1)),
                 Node("l_p1_bias_", local("p1_bias"))]
        self.assertEqual(backend(Graph(nodes), []), "compiled")
        self.assertEqual(seen, ["x0", "p2_running_mean", 1, "p1_bias"])
        order = inductor_kernel.call_order(seen, names)
        self.assertEqual(order, [0, 3, 1, 2])
        # a graph input TorchDynamo gives no source of: passed as they come
        self.assertIsNone(inductor_kernel.local_name(Node("l_x0_", None)))
        made = inductor_kernel.standalone(EMITTED, 4, 1, "2.x", {}, order)
        self.assertIn("outs = call([_dense(x0), _dense(x3), _dense(x1), _dense(x2)])", made["source"])
        # an input that is no argument, or one taken twice: passed as they come
        self.assertIsNone(inductor_kernel.call_order(["x0", "self_w"], names))
        self.assertIsNone(inductor_kernel.call_order(["x0", "x0"], names))
        self.assertIsNone(inductor_kernel.call_order([], names))
        # items of a traced *args
        self.assertEqual(inductor_kernel.call_order([1, 0], names), [1, 0])
        self.assertIsNone(inductor_kernel.call_order([7], names))
        made = inductor_kernel.standalone(EMITTED, 2, 1, "2.x", {}, None)
        self.assertIn("outs = call([_dense(x0), _dense(x1)])", made["source"])

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

    def test_max_autotune_lets_inductor_choose_aten_or_triton_and_keeps_the_lease(self):
        # the floor's max-autotune source (agents/flows/floor.lua): cuBLAS stays a choice
        tuned = inductor_kernel.compile_patches({"library": "allow", "max_autotune": True})
        self.assertEqual((tuned["max_autotune"], tuned["max_autotune_gemm_backends"]), (True, "ATEN,TRITON"))
        self.assertFalse(tuned["triton.cudagraphs"])
        self.assertTrue(inductor_kernel.times_kernels({"library": "allow", "max_autotune": True}))
        # deny wins: Triton templates only, as before
        deny = inductor_kernel.compile_patches({"library": "deny", "max_autotune": True})
        self.assertEqual(deny["max_autotune_gemm_backends"], "TRITON")
        self.assertTrue(inductor_kernel.times_kernels({"library": "deny"}))
        # the default compile neither autotunes nor keeps the lease
        self.assertNotIn("max_autotune", inductor_kernel.compile_patches({"library": "allow"}))
        self.assertFalse(inductor_kernel.times_kernels({"library": "allow", "max_autotune": False}))
        made = inductor_kernel.standalone(EMITTED, 2, 1, "2.x", {"library": "allow", "max_autotune": True})
        self.assertIn("library kernels allowed; max-autotune (ATen and Triton).", made["source"])

    def test_a_module_without_call_is_refused(self):
        made = inductor_kernel.standalone("import torch\n", 1, 1, "2.x", {})
        self.assertFalse(made["ok"])
        self.assertTrue(made["error"].startswith("EINDUCTOR"))


if __name__ == "__main__":
    unittest.main()
