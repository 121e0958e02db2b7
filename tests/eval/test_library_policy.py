"""The library policy (job field `library`: own, some, any) at the verdict, on synthetic kernel
profiles (names and times as the audit's traced call reports them; no GPU profile exists in CPU
mode), and the share every verdict records whatever the policy (verdict_library.py)."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.judge import audit, verdict_library  # noqa: E402
from kagent_eval.worker import job_spec  # noqa: E402
from kagent_eval.common.request import BadRequest  # noqa: E402

# a candidate that calls cuBLAS (torch.matmul) for its GEMM and runs its own epilogue kernel
CUBLAS_PLUS_EPILOGUE = [
    {"name": "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "time_ms": 0.8,
     "calls": 1},
    {"name": "bias_gelu_epilogue(float const*, float const*, float*, int, int)", "time_ms": 0.2,
     "calls": 1},
    {"name": "Memset (Device)", "time_ms": 0.01, "calls": 1},
]
CUBLAS_ONLY = [{"name": "ampere_sgemm_128x64_nn", "time_ms": 1.0, "calls": 1},
               {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::"
                        "CUDAFunctor_add<float>>()", "time_ms": 0.1, "calls": 1}]
OWN_ONLY = [{"name": "tiled_gemm(float const*, float const*, float*, int, int, int)",
             "time_ms": 1.0, "calls": 1}]
EPILOGUE_SOURCE = "__global__ void bias_gelu_epilogue(const float* x, const float* b, float* y)"
GEMM_SOURCE = "__global__ void tiled_gemm(const float* a, const float* b, float* c, int m)"


def judge(kernels, library, policy="reject", own_names=()):
    result = {"ok": True, "flags": [], "audit": {}}
    verdict_library.unknown_share(result, "no kernel audit ran")
    kernels = [dict(k) for k in kernels]
    accepted = verdict_library.apply_audit(result, kernels, policy, 0.5, library,
                                           audit.own_kernel_names(own_names))
    return accepted, result


class PolicyTest(unittest.TestCase):
    def test_own_refuses_a_kernel_carried_by_cublas(self):
        ok, r = judge(CUBLAS_PLUS_EPILOGUE, "own", own_names=EPILOGUE_SOURCE)
        self.assertFalse(ok)
        self.assertEqual((r["stage"], r["code"]), ("audit", "EFALLBACK"))
        self.assertIn("carry 20% of its GPU time", r["error"])
        self.assertIn("fallback", r["flags"])

    def test_some_accepts_library_time_beside_an_own_kernel(self):
        ok, r = judge(CUBLAS_PLUS_EPILOGUE, "some", own_names=EPILOGUE_SOURCE)
        self.assertTrue(ok, r.get("error"))
        self.assertNotIn("fallback", r["flags"])
        self.assertFalse(r["audit"]["fallback"])
        self.assertEqual(r["audit"]["library"], "some")

    def test_some_refuses_a_call_that_runs_no_own_kernel(self):
        ok, r = judge(CUBLAS_ONLY, "some")
        self.assertFalse(ok)
        self.assertEqual(r["code"], "EFALLBACK")
        self.assertIn('library = "some"', r["error"])
        self.assertIn("ampere_sgemm_128x64_nn", r["error"])

    def test_any_judges_correctness_and_time_only(self):
        ok, r = judge(CUBLAS_ONLY, "any")
        self.assertTrue(ok)
        self.assertNotIn("fallback", r["flags"])
        self.assertEqual(r["own_share"], 0.0)

    def test_flag_lets_a_breach_through_with_the_flag(self):
        ok, r = judge(CUBLAS_ONLY, "own", policy="flag")
        self.assertTrue(ok)
        self.assertIn("fallback", r["flags"])
        self.assertNotIn("code", r)

    def test_every_policy_records_the_share_and_the_library_kernels(self):
        for library in verdict_library.POLICIES:
            _, r = judge(CUBLAS_PLUS_EPILOGUE, library, own_names=EPILOGUE_SOURCE)
            self.assertAlmostEqual(r["own_share"], 0.2, places=6, msg=library)
            self.assertEqual(r["library_kernels"], [CUBLAS_PLUS_EPILOGUE[0]["name"]], library)
            self.assertNotIn("own_share_unknown", r, library)
            _, r = judge(OWN_ONLY, library, own_names=GEMM_SOURCE)
            self.assertEqual((r["own_share"], r["library_kernels"]), (1.0, []), library)

    def test_no_kernel_at_all_gives_no_share_and_says_why(self):
        ok, r = judge([], "any")
        self.assertTrue(ok)
        self.assertNotIn("own_share", r)
        self.assertEqual(r["own_share_unknown"], "the audited call ran no kernel")
        ok, r = judge([], "own")
        self.assertFalse(ok, "no kernel at all is not a custom kernel (today's rule)")


class OwnCudaKernelTest(unittest.TestCase):
    def test_a_cuda_kernel_the_source_defines_is_own_whatever_its_words(self):
        # "gemm" is a word of vendor kernels: without the source's __global__ it is not trusted
        self.assertTrue(audit.is_library_kernel(OWN_ONLY[0]["name"]))
        own = audit.own_kernel_names(GEMM_SOURCE + "\n__global__ void __launch_bounds__(256) "
                                     "k2(float* x) {}")
        self.assertEqual(own, {"tiled_gemm", "k2"})
        self.assertFalse(audit.is_library_kernel(OWN_ONLY[0]["name"], own))
        self.assertFalse(audit.is_library_kernel("void tiled_gemm<32>(float const*)", own))

    def test_a_vendor_name_stays_a_library_kernel_whatever_the_source_declares(self):
        own = audit.own_kernel_names("__global__ void ampere_sgemm_128x64_nn(float* x) {}")
        self.assertTrue(audit.is_library_kernel("ampere_sgemm_128x64_nn", own))
        own = audit.own_kernel_names("__global__ void elementwise_kernel(float* x) {}")
        self.assertTrue(audit.is_library_kernel(
            "void at::native::elementwise_kernel<128, 2>(int, float*)", own))


class JobFieldTest(unittest.TestCase):
    def normalize(self, **job):
        here = os.path.abspath(__file__)
        ev = types.SimpleNamespace(device="cpu", threads=1, sample_seed=1, replay_seed=2)
        return job_spec.normalize(ev, "verify", dict(problem=here, candidate="x = 1\n", **job))

    def test_library_defaults_to_own_and_takes_only_the_three_values(self):
        self.assertEqual(self.normalize()["library"], "own")
        for value in ("own", "some", "any"):
            self.assertEqual(self.normalize(library=value)["library"], value)
        with self.assertRaisesRegex(BadRequest, "library must be one of own, some, any"):
            self.normalize(library="cublas")


if __name__ == "__main__":
    unittest.main()
