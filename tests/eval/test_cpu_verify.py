"""Verification details through a real CPU-mode worker: reports, sampling of big outputs,
kernel_function binding, protocol errors."""
import os
import shutil
import tempfile
import unittest

from worker_client import CpuWorkerTest, fixture
from kagent_eval.judge import trust


class CpuVerifyTest(CpuWorkerTest):
    def test_ready_line(self):
        self.assertEqual(self.w.ready["mode"], "cpu")
        self.assertTrue(self.w.ready["torch"])

    def test_good_candidate_reports_checks_and_errors(self):
        r = self.w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["trials"], 5)
        # its input is torch.rand's, in [0, 1): of the property trials only zeros stays inside
        # that contract; the others are skipped with a note (test_cpu_contract.py)
        self.assertEqual(r["property_trials"], 1)
        self.assertEqual([s["distribution"] for s in r["skipped_trials"]],
                         ["negative", "huge", "nonfinite"])
        self.assertIsInstance(r["replay_seed"], int)
        for key in ("shape", "dtype", "values", "magnitude", "inputs_unchanged", "no_alias",
                    "no_cache", "properties"):
            self.assertTrue(r["checks"][key], key)
        self.assertEqual(r["max_abs_err"], 0.0)
        self.assertEqual(r["audit"]["applicable"], False)

    def test_an_input_written_in_place_is_named_and_inputs_left_alone_pass(self):
        bad = self.w.job("verify", "relu_problem.py", fixture("adversarial", "cpu_mutate_input.py"))
        self.assertFalse(bad["ok"])
        self.assertIn("wrote into its input", bad["error"])
        self.assertFalse(bad["checks"]["inputs_unchanged"])
        # a sampled input holding NaN and infinities (the non-finite trial, required here) is
        # still the input it was given
        good = self.w.job("verify", "relu_sampled_problem.py", fixture("eval", "relu_good.py"),
                          nonfinite="require")
        self.assertTrue(good["ok"], good.get("error"))
        self.assertTrue(good["checks"]["inputs_unchanged"])
        self.assertEqual(good["property_trials"], 4)  # the non-finite one among them, judged

    def test_mismatch_location_is_reported(self):
        src = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
               "        y = torch.relu(x).clone()\n        y[3, 7] += 1.0\n        return y\n")
        r = self.w.job("verify", "relu_problem.py", src)
        self.assertFalse(r["ok"])
        self.assertEqual(r["mismatch"]["index"], [3, 7])
        self.assertEqual(r["mismatch"]["output_index"], 0)
        self.assertEqual(r["mismatch"]["trial"], 0)
        self.assertAlmostEqual(r["mismatch"]["got"] - r["mismatch"]["expected"], 1.0, places=4)
        self.assertGreaterEqual(r["max_abs_err"], 0.99)

    def test_big_outputs_are_sampled_and_still_checked(self):
        good = self.w.job("verify", "big_scale_problem.py", fixture("eval", "big_scale_good.py"))
        self.assertTrue(good["ok"], good)
        bad = self.w.job("verify", "big_scale_problem.py", fixture("adversarial", "cpu_wrong_block_big.py"))
        self.assertFalse(bad["ok"])
        self.assertTrue(bad["error"].startswith("EMISMATCH"), bad["error"])

    def test_kernel_function_binds_parameters_by_name(self):
        r = self.w.job("verify", "linear_problem.py", fixture("eval", "linear_kernel_function.py"))
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["candidate_kind"], "kernel_function")
        # where the build stage went, as the candidate's process tells it (a diagnostic)
        parts = r["build_parts"]
        self.assertEqual(sorted(k for k in parts if k != "imported_inductor"),
                         ["candidate", "import", "reference_model"])
        self.assertTrue(all(v >= 0 for k, v in parts.items() if k != "imported_inductor"), parts)
        self.assertIs(parts["imported_inductor"], False)

    def test_the_reference_process_reports_its_stages_where_the_job_ran_it(self):
        with tempfile.TemporaryDirectory(prefix="kagent-ref-") as d:
            problem = os.path.join(d, "relu_problem.py")  # a problem no other test's job ran
            shutil.copy(fixture("eval", "relu_problem.py"), problem)
            first = self.w.job("verify", problem, fixture("eval", "relu_good.py"))
            again = self.w.job("verify", problem, fixture("eval", "relu_good.py"))
        self.assertTrue(first["ok"] and again["ok"], (first, again))
        stages = first["reference_stage_s"]
        self.assertTrue({"load", "run"} <= set(stages), stages)
        self.assertTrue(all(v >= 0 for v in stages.values()), stages)
        self.assertLessEqual(sum(stages.values()), first["reference_s"] + 1e-3)
        # the second job's reference outputs are the first's: no process, no stages
        self.assertNotIn("reference_stage_s", again)
        self.assertEqual(again["reference_s"], 0.0)

    def test_kernel_function_with_kwargs_gets_kernelagents_keywords(self):
        # kernel_function(x, *args, **kwargs), as KernelAgent's harness calls it: the layer's
        # weight, bias, stride, padding, dilation and groups arrive as keywords
        r = self.w.job("verify", "conv_stride_problem.py",
                       fixture("eval", "conv_kernel_function_kwargs.py"))
        self.assertTrue(r["ok"], r.get("error"))
        self.assertEqual(r["candidate_kind"], "kernel_function")
        wrong = self.w.job("verify", "conv_stride_problem.py",
                           fixture("eval", "conv_kernel_function_kwargs_wrong.py"))
        self.assertFalse(wrong["ok"])
        # the output shape gives the ignored dilation away before any value is compared
        self.assertEqual((wrong["stage"], wrong["code"]), ("correctness", "EMISMATCH"),
                         wrong.get("error"))

    def test_modelnew_gets_reference_weights_by_name(self):
        r = self.w.job("verify", "linear_problem.py", fixture("eval", "linear_modelnew.py"))
        self.assertTrue(r["ok"], r)

    def test_all_outputs_of_a_tuple_are_compared(self):
        r = self.w.job("verify", "tuple_problem.py", fixture("eval", "tuple_good.py"))
        self.assertTrue(r["ok"], r)

    def test_bf16_policy_uses_loose_tolerance(self):
        r = self.w.job("verify", "matmul_problem.py", fixture("adversarial", "cpu_lower_precision.py"),
                       dtype="bf16")
        self.assertEqual(r["tolerance"], {"rtol": 1e-2, "atol": 1e-2})
        self.assertEqual(r["dtype"], "bf16")

    def test_fingerprint_ignores_comments_and_formatting(self):
        a = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
        b = "# a comment\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):  # relu\n        return torch.relu( x )\n"
        ra = self.w.job("verify", "relu_problem.py", a)
        rb = self.w.job("verify", "relu_problem.py", b)
        self.assertEqual(ra["fingerprint"], rb["fingerprint"])

    def test_bad_requests_are_protocol_errors(self):
        r = self.w.request("verify", {"problem": "/nonexistent.py", "candidate": "x"})
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EBADREQ")
        r = self.w.request("frobnicate", {})
        self.assertEqual(r["code"], "EBADREQ")

    def test_a_job_gets_the_defaults_the_ready_line_states(self):
        defaults = self.w.ready["job_defaults"]
        self.assertIn("compile", self.w.ready["baselines"])
        r = self.w.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                       bench={"budget": 0.05})
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["dtype"], defaults["dtype"])
        # no baselines asked for: the candidate is timed alone
        self.assertEqual(defaults["bench"]["baselines"], [])
        self.assertFalse([k for k in r if k.endswith("_ms") and k != "time_ms"], r.keys())

    def test_beyond_sol_is_rejected_after_a_remeasure(self):
        r = self.w.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                       sol_ms=1e6, bench={"budget": 0.05, "baselines": []})
        self.assertFalse(r["ok"], r)
        self.assertEqual((r["stage"], r["code"]), ("timing", "EUNTRUSTED"))
        self.assertIn("speed-of-light", r["error"])
        self.assertTrue(r["trust"]["remeasured"])
        for key in ("time_ms", "roofline", "speedup_vs_eager"):
            self.assertNotIn(key, r)  # an untrusted figure is not reported at all

    def test_a_spread_no_loop_meets_is_not_measured_and_states_every_ratio(self):
        # a limit no loop of calls meets (p90/p10 is at least 1), the control's neither: the
        # machine's noise as far as the worker can tell (noise.py), so "not measured" after the
        # re-measures, and the error gives what a user compares, the ratios, not an untrusted time
        r = self.w.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                       max_spread=1.0000001, bench={"budget": 0.05, "baselines": []})
        self.assertFalse(r["ok"], r)
        self.assertEqual((r["stage"], r["code"]), ("timing", "ENOISY"))
        self.assertIn("spread", r["trust"]["not_measured"])
        self.assertRegex(r["error"], r"p90/p10 of the calls: first [0-9.e+]+, re-measure [0-9.e+]+")
        self.assertRegex(r["error"], r"the control \(the reference's eager forward, timed after each "
                                     r"re-measure\): p90/p10 [0-9.e+]+")
        self.assertNotIn("time_ms", r)

    def test_a_bound_below_the_time_raises_no_flag_and_asks_no_remeasure(self):
        r = self.w.job("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                       sol_ms=1e-6, bench={"budget": 0.05, "baselines": []})
        self.assertNotIn("beyond_sol", r["trust"]["first_flags"], r)
        self.assertNotIn("beyond_sol", r["trust"].get("second_flags", []), r)
        if not r["trust"]["first_flags"]:
            self.assertFalse(r["trust"]["remeasured"], r)  # the bound alone asks for none
            self.assertTrue(r["ok"], r)
        else:
            # only a loaded machine's flags may have asked for it, never the bound
            self.assertLessEqual(set(r["trust"]["first_flags"]), trust.NOISE_FLAGS, r)
        if r["ok"]:
            self.assertLess(r["roofline"]["sol_pct"], 100)
        else:
            self.assertLessEqual(set(r["trust"]["rejected"]), trust.NOISE_FLAGS, r)

    def test_confirm_remeasures_in_a_fresh_process_and_keeps_the_baselines_method(self):
        # a call of milliseconds: microsecond CPU calls move with whatever ran before them
        r = self.w.job("benchmark", "matmul_problem.py", fixture("eval", "matmul_good.py"),
                       confirm=True, bench={"budget": 0.2, "baselines": ["eager"]})
        self.assertTrue(r["ok"], r)
        self.assertTrue(r["trust"]["remeasured"])
        self.assertEqual(r["trust"]["second_flags"], [])
        self.assertTrue(r["time_ms_hardened"]["hardened"])
        self.assertFalse(r["time_ms_first"]["hardened"])
        # an unflagged first figure stands (timed as eager was); a flagged one is replaced
        flagged = bool(r["trust"]["first_flags"])
        self.assertEqual(r["time_ms"]["hardened"], flagged, r["trust"])
        self.assertAlmostEqual(r["speedup_vs_eager"], r["eager_ms"] / r["time_ms"]["median"])


if __name__ == "__main__":
    unittest.main()
