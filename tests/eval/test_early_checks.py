"""The trials' comparisons begun while the candidate's process still runs (early_checks.py): the
verdict is the one the worker reaches comparing after the process, in every case that decides
it, and the result says how many trials were compared early."""
import unittest

from worker_client import Worker, fixture

WRONG_AT = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        y = torch.relu(x).clone()\n        y[3, 7] += 1.0\n        return y\n")
IN_PLACE = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        y = torch.relu(x)\n        x.mul_(2)\n        return y\n")
# right on the regular trials' inputs, wrong on the property trial of zeros (ReLU(0) is 0)
WRONG_ON_ZEROS = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                  "        return torch.where(x == 0, torch.ones_like(x), torch.relu(x))\n")

# a candidate that forges a trial frame out of shape through its process's own channel to the
# worker, then hangs in its first call
FORGES_AND_HANGS = (
    "import fcntl, os, signal, stat, sys, time\nimport torch\n"
    "wire = sys.modules['kagent' + '_eval.common.wire']\n"
    "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
    "        signal.signal(signal.SIGPIPE, signal.SIG_IGN)\n"
    "        for fd in range(3, 256):\n"
    "            try:\n"
    "                if stat.S_ISFIFO(os.fstat(fd).st_mode) and "
    "fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:\n"
    "                    wire.send(fd, {'type': 'trial', 'trial': 0, 'outputs': 'junk'})\n"
    "            except OSError:\n"
    "                pass\n"
    "        while True:\n            time.sleep(1)\n")

# the parts of a result the verdict decides
VERDICT_KEYS = ("ok", "error", "stage", "checks", "trials", "property_trials", "mismatch",
                "max_abs_err", "max_rel_err", "rel_l2_err", "kernelbench", "skipped_trials")


def verdict_of(result):
    out = {k: result.get(k) for k in VERDICT_KEYS}
    if isinstance(out["mismatch"], dict):  # the seed of a property trial is the worker's own
        out["mismatch"] = {k: v for k, v in out["mismatch"].items() if k != "seed"}
    return out


class EarlyChecksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.early = Worker("cpu", env={"KAGENT_EVAL_EARLY_CHECKS": "1"})
        cls.after = Worker("cpu", env={"KAGENT_EVAL_EARLY_CHECKS": "0"})

    @classmethod
    def tearDownClass(cls):
        cls.early.close()
        cls.after.close()

    def both(self, op, problem, candidate, **extra):
        job = dict({"replay_seed": 7}, **extra)
        return (self.early.job(op, problem, candidate, **job),
                self.after.job(op, problem, candidate, **job))

    def assertSameVerdict(self, early, after):
        self.assertEqual(verdict_of(early), verdict_of(after))

    def test_a_good_candidate_verifies_alike_with_its_trials_compared_early(self):
        early, after = self.both("verify", "relu_problem.py", fixture("eval", "relu_good.py"))
        self.assertTrue(early["ok"], early)
        self.assertSameVerdict(early, after)
        # the five regular trials and the property trial the input contract keeps
        self.assertEqual(early["worker_s"]["early_trials"], 6)
        self.assertNotIn("early_trials", after["worker_s"])
        # the candidate's process built a model and ran its trials: CPU time, taken when reaped
        self.assertGreater(early["cpu_s"]["candidate"], 0)
        self.assertIn("worker", early["cpu_s"])

    def test_a_timed_job_compares_its_trials_early_and_times_alike(self):
        early, after = self.both("benchmark", "relu_problem.py", fixture("eval", "relu_good.py"),
                                 bench={"min_time": 0.05, "baselines": []})
        self.assertTrue(early["ok"], early)
        self.assertSameVerdict(early, after)
        self.assertEqual(early["worker_s"]["early_trials"], 6)
        self.assertGreater(early["time_ms"]["median"], 0)

    def test_a_wrong_element_is_found_at_the_same_place(self):
        early, after = self.both("verify", "relu_problem.py", WRONG_AT)
        self.assertFalse(early["ok"])
        self.assertTrue(early["error"].startswith("EMISMATCH"), early["error"])
        self.assertEqual(early["mismatch"]["index"], [3, 7])
        self.assertSameVerdict(early, after)

    def test_an_input_written_in_place_is_refused_alike(self):
        early, after = self.both("verify", "relu_problem.py", IN_PLACE)
        self.assertFalse(early["ok"])
        self.assertIn("wrote into its input", early["error"])
        self.assertSameVerdict(early, after)

    def test_a_failure_only_a_property_trial_shows_is_refused_alike(self):
        early, after = self.both("verify", "relu_problem.py", WRONG_ON_ZEROS)
        self.assertFalse(early["ok"])
        self.assertTrue(early["error"].startswith("EPROPERTY"), early["error"])
        self.assertSameVerdict(early, after)

    def test_a_forged_frame_leaves_the_hanging_process_to_its_deadline(self):
        """A frame the early checks cannot read must not stop the worker reading the process:
        the process still runs into its stage's deadline, the worker still answers, and the
        job is refused for what its process sent."""
        r = self.early.job("verify", "relu_problem.py", FORGES_AND_HANGS,
                           timeouts={"compile": 4, "run": 4})
        self.assertFalse(r["ok"])
        self.assertIn("bad data from the sandbox: trial 0's outputs", r["error"])
        self.assertTrue(self.early.request("ping", timeout=30)["ok"])


if __name__ == "__main__":
    unittest.main()
