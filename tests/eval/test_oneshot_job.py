"""`kagent-eval check` sends the job the agents send, from the evaluator's own statements: the
reported baselines of job_defaults.py (the ready line's `reported_baselines`) and the tolerance
names and default of compare.py, never a copy of its own (issue #56)."""
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.common import job_defaults  # noqa: E402
from kagent_eval.judge import compare  # noqa: E402
from kagent_eval.worker import oneshot, ready_fields  # noqa: E402


class OneshotJobTest(unittest.TestCase):
    def test_the_job_times_the_reported_baselines_job_defaults_states(self):
        with mock.patch.object(job_defaults, "REPORTED_BASELINES", ("compile",)):
            job = oneshot.job_for("p.py", "src")
        self.assertEqual(job["bench"]["baselines"], ["compile"])

    def test_the_summary_lists_the_reported_baselines(self):
        r = {"ok": True, "device": "cpu", "eager_ms": 2.0, "compile_ms": 4.0, "time_ms": {"median": 1.0}}
        with mock.patch.object(job_defaults, "REPORTED_BASELINES", ("compile",)):
            text = oneshot.summary(r)
        self.assertIn("compile", text)
        self.assertNotIn("eager", text)

    def test_no_tolerance_named_takes_the_evaluators_default(self):
        with mock.patch.object(job_defaults, "DEFAULT_TOLERANCE", "kernelbench-v0.1"):
            self.assertEqual(oneshot.job_for("p.py", "src")["tolerance"], "kernelbench-v0.1")
        self.assertEqual(oneshot.job_for("p.py", "src", tolerance="kernelbench-v0.1")["tolerance"], "kernelbench-v0.1")

    def test_the_command_line_offers_the_evaluators_tolerance_names(self):
        sets = dict(compare.TOLERANCE_SETS, planted=compare.TOLERANCE_SETS["strict"])
        with mock.patch.object(compare, "TOLERANCE_SETS", sets), \
                mock.patch.object(oneshot, "check", return_value={"ok": True, "device": "cpu", "time_ms": {}}) as check, \
                mock.patch("os.path.isfile", return_value=True), mock.patch("sys.stdout"):
            oneshot.main(["check", "p.py", "k.py", "--tolerance", "planted"])
        self.assertEqual(check.call_args.kwargs["tolerance"], "planted")

    def test_the_ready_line_carries_the_reported_baselines(self):
        fields = ready_fields.fields()
        self.assertEqual(fields["reported_baselines"], list(job_defaults.REPORTED_BASELINES))
        self.assertTrue(set(fields["reported_baselines"]) <= set(fields["baselines"]))

    def test_the_ready_line_lists_the_tolerance_names_compare_defines(self):
        sets = dict(compare.TOLERANCE_SETS, planted=compare.TOLERANCE_SETS["strict"])
        with mock.patch.object(compare, "TOLERANCE_SETS", sets):
            names = ready_fields.fields()["tolerances"]
        self.assertIn("planted", names)
        self.assertIn(job_defaults.DEFAULT_TOLERANCE, names)


if __name__ == "__main__":
    unittest.main()
