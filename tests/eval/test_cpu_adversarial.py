"""Every CPU-applicable cheat of REFERENCE.md §6 is rejected or flagged by a real CPU-mode worker,
and crashes, hangs and exits leave the worker able to run the next job."""
import unittest

from worker_client import CpuWorkerTest, fixture

# candidate -> (problem, op, expected stage, expected error code or None for ok)
CASES = {
    "cpu_try_except_fallback.py": ("relu_problem.py", "verify", "audit", "ESTATIC"),
    "cpu_subclass_reference.py": ("relu_problem.py", "verify", "audit", "ESTATIC"),
    "cpu_uninitialized_output.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_zero_output_softmax.py": ("softmax_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_constant_output_softmax.py": ("softmax_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_mutate_input.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_inplace_alias_input.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_lazy_subclass.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_patch_timer_static.py": ("relu_problem.py", "verify", "audit", "ESTATIC"),
    "cpu_patch_allclose.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_lower_precision.py": ("matmul_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_relu_identity.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_repeat_fast_path.py": ("matmul_problem.py", "benchmark", "timing", "ESTALE"),
    "cpu_first_output_only.py": ("tuple_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_static_buffer.py": ("relu_problem.py", "verify", "correctness", "EMISMATCH"),
    "cpu_segfault.py": ("relu_problem.py", "verify", "compile", "ECRASH"),
    "cpu_exit_on_load.py": ("relu_problem.py", "verify", "load", "ECRASH"),
    "cpu_raises.py": ("relu_problem.py", "verify", "compile", "ERUN"),
}
BENCH = {"budget": 0.1, "min_reps": 5}


class CpuAdversarialTest(CpuWorkerTest):
    def run_case(self, cand, problem, op, **extra):
        if op == "benchmark":
            extra.setdefault("bench", BENCH)
        return self.w.job(op, problem, fixture("adversarial", cand), **extra)

    def assert_good_job_still_runs(self):
        r = self.w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
        self.assertTrue(r["ok"], r)

    def test_each_cheat_is_rejected(self):
        for cand, (problem, op, stage, code) in CASES.items():
            with self.subTest(candidate=cand):
                r = self.run_case(cand, problem, op)
                self.assertFalse(r["ok"], r)
                self.assertEqual(r["stage"], stage, r.get("error"))
                self.assertTrue(r["error"].startswith(code + ":"), r["error"])
        self.assert_good_job_still_runs()

    def test_segfault_names_the_signal(self):
        r = self.run_case("cpu_segfault.py", "relu_problem.py", "verify")
        self.assertIn("SIGSEGV", r["error"])
        self.assert_good_job_still_runs()

    def test_infinite_loop_times_out_and_worker_carries_on(self):
        r = self.run_case("cpu_infinite_loop.py", "relu_problem.py", "verify", timeout=2)
        self.assertFalse(r["ok"])
        self.assertEqual(r["stage"], "compile")
        self.assertTrue(r["error"].startswith("ETIMEDOUT:"), r["error"])
        self.assertLess(r["elapsed"], 30)
        self.assert_good_job_still_runs()

    def test_cache_by_address_is_caught(self):
        r = self.run_case("cpu_cache_by_address.py", "matmul_problem.py", "benchmark")
        self.assertFalse(r["ok"], r)
        # a timed call on inputs moved to an address it cached (ESTALE), the fresh-input probe
        # (ECACHE), or an address reused across trials (EMISMATCH, or EPROPERTY when the allocator
        # hands the cached address to a property trial first: which one depends on the CPU's kernels)
        self.assertIn(r["error"].split(":")[0], ("ESTALE", "ECACHE", "EMISMATCH", "EPROPERTY"),
                      r["error"])

    def test_cache_by_content_is_caught(self):
        r = self.run_case("cpu_cache_by_content.py", "matmul_problem.py", "benchmark")
        self.assertFalse(r["ok"], r)
        self.assertEqual(r["error"].split(":")[0], "ECACHE", r["error"])

    def test_background_thread_is_rejected_or_flagged(self):
        r = self.run_case("cpu_thread_late_write.py", "relu_problem.py", "verify")
        self.assertTrue(not r["ok"] or "static:streams_threads" in r["flags"]
                        or "threads_started" in r["flags"], r)
        self.assertIn("static:streams_threads", r["flags"])

    def test_dynamic_timer_patch_does_not_reach_the_harness_clock(self):
        good = self.w.job("benchmark", "matmul_problem.py", fixture("eval", "matmul_good.py"),
                          bench=BENCH)
        r = self.run_case("cpu_patch_timer_dynamic.py", "matmul_problem.py", "benchmark")
        self.assertTrue(r["ok"], r)
        # the patched clock runs 1000x slow; a real time is within a few x of the honest one
        self.assertGreater(r["time_ms"]["median"], 0.2 * good["time_ms"]["median"])

    def test_candidate_stdout_does_not_break_the_protocol(self):
        self.run_case("cpu_exit_on_load.py", "relu_problem.py", "verify")
        self.assertTrue(self.w.request("ping")["ok"])


if __name__ == "__main__":
    unittest.main()
