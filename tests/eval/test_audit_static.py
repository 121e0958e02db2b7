"""Kernel classification for the fallback audit and the static checks (pure functions)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.judge import audit, static_checks  # noqa: E402


class AuditTest(unittest.TestCase):
    def test_triton_kernels_are_own(self):
        for name in ("_gemv_partial_kernel", "_maxpool3d_kernel", "matmul_kernel", "_fft_kernel"):
            self.assertFalse(audit.is_library_kernel(name), name)

    def test_library_kernels_are_flagged(self):
        for name in ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128>(Params)",
                     "ampere_sgemm_128x64_nn", "sm90_xmma_gemm_bf16bf16_bf16f32", "nvjet_hsh_128x256_64x4",
                     "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
                     "void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false>(...)",
                     "void implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>()"):
            self.assertTrue(audit.is_library_kernel(name), name)

    def test_fallback_needs_own_kernels_to_carry_the_time(self):
        ks = [{"name": "ampere_sgemm_128x64_nn", "time_ms": 1.0}, {"name": "_touch", "time_ms": 0.001}]
        v = audit.classify(ks)
        self.assertTrue(v["fallback"])
        self.assertLess(v["own_time_frac"], 0.01)
        v = audit.classify([{"name": "_relu", "time_ms": 1.0}, {"name": "Memset (Device)", "time_ms": 5.0}])
        self.assertFalse(v["fallback"])
        self.assertEqual(v["own_time_frac"], 1.0)
        self.assertTrue(audit.classify([])["fallback"], "no kernel at all is not a custom kernel")


class StaticTest(unittest.TestCase):
    def rules(self, src):
        return {f["rule"]: f["severity"] for f in static_checks.scan(src)}

    def test_timer_and_sync_patching_rejected(self):
        self.assertEqual(self.rules("import torch\ntorch.cuda.synchronize = lambda: None\n")["patches_harness"], "reject")
        self.assertEqual(self.rules("import time\nsetattr(time, 'perf_counter', id)\n")["patches_harness"], "reject")

    def test_try_except_fallback_rejected_plain_try_flagged(self):
        src = "import torch\ndef kernel_function(x):\n    try:\n        return f(x)\n    except Exception:\n        return torch.relu(x)\n"
        self.assertEqual(self.rules(src)["try_except_fallback"], "reject")
        src = "def kernel_function(x):\n    try:\n        return f(x)\n    except KeyError:\n        raise\n"
        self.assertEqual(self.rules(src)["try_except"], "flag")

    def test_compute_ops_in_wrapper_flagged(self):
        src = "import torch\ndef kernel_function(a, b):\n    return a @ b\n"
        self.assertEqual(self.rules(src)["torch_compute_in_wrapper"], "flag")
        src = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.sum(x)\n"
        self.assertIn("torch_compute_in_wrapper", self.rules(src))

    def test_streams_threads_flagged(self):
        self.assertIn("streams_threads", self.rules("import torch\ns = torch.cuda.Stream()\n"))
        self.assertIn("streams_threads", self.rules("import threading\n"))

    def test_subclass_and_syntax_error(self):
        self.assertEqual(self.rules("class ModelNew(Model):\n    pass\n")["subclass_reference"], "reject")
        self.assertEqual(self.rules("def f(:\n")["syntax_error"], "reject")

    def test_plain_triton_kernel_is_clean(self):
        with open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "eval", "gpu_relu_triton.py")) as f:
            self.assertEqual([x for x in static_checks.scan(f.read()) if x["severity"] == "reject"], [])


if __name__ == "__main__":
    unittest.main()
