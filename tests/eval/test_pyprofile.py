"""KAGENT_EVAL_PYPROFILE (pyprofile.py), through a real CPU-mode worker: where a job's Python time
went, in the candidate's process and in the worker's checks after it, comes back in the result;
a worker without it adds nothing; and a job that ends before its checks still replies."""
import unittest

from worker_client import Worker, fixture


class PyprofileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Worker("cpu", env={"KAGENT_EVAL_PYPROFILE": "1"})

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def test_both_sides_of_a_job_are_listed(self):
        r = self.w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
        self.assertTrue(r["ok"], r.get("error"))
        child, checks = r["pyprofile"]["child"], r["pyprofile"]["worker_checks"]
        # the candidate's trials ran in its process, the comparison of their outputs in the worker
        self.assertIn("child_candidate.py", child)
        self.assertIn("(_trials)", child)
        self.assertIn("(check_trials)", checks)
        # the comparisons ran in the profiled thread, not behind a wait on a thread pool
        self.assertIn("(compare_outputs)", checks)
        self.assertNotIn("(check_trials)", child)

    def test_a_job_refused_before_its_candidate_ran_still_replies(self):
        # refused by the static checks: no candidate process, no checks after it
        r = self.w.job("verify", "relu_problem.py",
                       fixture("adversarial", "cpu_subclass_reference.py"))
        self.assertFalse(r["ok"])
        self.assertEqual(r.get("code"), "ESTATIC", r.get("error"))
        self.assertNotIn("child", r["pyprofile"])
        self.assertEqual(r["pyprofile"]["worker_checks"], "nothing profiled")


class WithoutPyprofileTest(unittest.TestCase):
    def test_no_listing_unless_asked(self):
        w = Worker("cpu")
        try:
            r = w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
        finally:
            w.close()
        self.assertTrue(r["ok"], r.get("error"))
        self.assertNotIn("pyprofile", r)


if __name__ == "__main__":
    unittest.main()
