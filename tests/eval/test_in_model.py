"""In-model jobs (the job field `in_model`, kagent_eval/common/in_model.py) through a real CPU-mode
worker: the problem is a model, the candidate a kernel put in place of its submodules, and the
benchmark path's checks and figures apply to the whole model."""
import os
import unittest

from worker_client import CpuWorkerTest, ROOT, fixture

INTEGRATE = os.path.join(ROOT, "tests", "fixtures", "integrate")
MODEL = os.path.join(INTEGRATE, "relu_mlp_model.py")
RELU_PROBLEM = fixture("eval", "relu_problem.py")


class InModelJobs(CpuWorkerTest):
    def job(self, op, kernel, problem=MODEL, **extra):
        job = dict(problem=problem, candidate=os.path.join(INTEGRATE, kernel), library="any",
                   bench={"baselines": ["eager"]}, **extra)
        reply = self.w.request(op, job, timeout=600)
        return reply

    def test_a_right_kernel_gives_a_verified_in_model_figure_with_its_spread(self):
        reply = self.job("benchmark", "relu_cpu.py",
                         in_model={"kernel_problem": RELU_PROBLEM, "match_class": "ReLU"})
        self.assertTrue(reply["ok"], reply)
        r = reply["result"]
        self.assertTrue(r["ok"], r.get("error"))
        t = r["time_ms"]
        for key in ("median", "p10", "p90", "spread", "n"):
            self.assertIsInstance(t[key], (int, float), key)
        self.assertGreaterEqual(t["p90"], t["p10"])
        # the original model timed beside it: the in-model speedup is a benchmark's speedup
        self.assertIsInstance(r["eager_ms"], float)
        self.assertAlmostEqual(r["speedup_vs_eager"], r["eager_ms"] / t["median"])
        self.assertGreaterEqual(r["timed_outputs"]["checked_calls"], 1, r["timed_outputs"])

    def test_a_kernel_right_alone_and_wrong_in_the_model_is_refused(self):
        # identity is ReLU on relu_problem's own inputs (all >= 0): on those alone it verifies ...
        alone = self.job("verify", "relu_identity_cpu.py", problem=RELU_PROBLEM,
                         properties=False, trials=1)["result"]
        self.assertTrue(alone["ok"], alone.get("error"))
        # ... and inside the model, whose ReLUs see negative values, it gives no figure
        reply = self.job("benchmark", "relu_identity_cpu.py",
                         in_model={"kernel_problem": RELU_PROBLEM, "paths": ["act1", "act2"]})
        r = reply["result"]
        self.assertFalse(r["ok"])
        self.assertTrue(r["error"].startswith("EMISMATCH"), r["error"])
        self.assertNotIn("median", r.get("time_ms") or {})

    def test_a_path_that_names_no_submodule_fails_the_load_and_says_so(self):
        r = self.job("verify", "relu_cpu.py",
                     in_model={"kernel_problem": RELU_PROBLEM, "paths": ["no.such"]})["result"]
        self.assertFalse(r["ok"])
        self.assertIn("no submodule at no.such", r["error"])

    def test_a_malformed_in_model_field_is_refused(self):
        reply = self.job("verify", "relu_cpu.py", in_model={"kernel_problem": RELU_PROBLEM})
        self.assertFalse(reply["ok"])
        self.assertIn("in_model needs one of paths", str(reply.get("error")))


if __name__ == "__main__":
    unittest.main()
