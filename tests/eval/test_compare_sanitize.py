"""The compare op (interleaved timing of verified candidates) and the sanitize op, through a
real CPU-mode worker."""
import os
import unittest

from worker_client import ROOT, Worker, fixture

PROBLEM = os.path.join(ROOT, "examples", "problems", "rmsnorm_small.py")
SLOW = os.path.join(ROOT, "examples", "kernels", "cpu", "rmsnorm_small_slow.py")
FAST = os.path.join(ROOT, "examples", "kernels", "cpu", "rmsnorm_small_fast.py")


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # one thread: a thread pool on a loaded two-core machine times the machine, not the kernel
        cls.w = Worker("cpu", threads=1)

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def compare(self, candidates, **extra):
        reply = self.w.request("compare", dict(problem=PROBLEM, candidates=candidates, **extra))
        self.assertTrue(reply["ok"], reply)
        return reply["result"]

    def test_the_faster_candidate_shows_a_speedup_over_the_first(self):
        # eight blocks, so that the median of the pairs holds where one pair stalls on a loaded
        # machine (CI once saw 1.08 from two pairs of a 20x gap)
        r = self.compare([SLOW, FAST], rounds=8, calls_per_block=3)
        self.assertTrue(r["ok"], r)
        first, second = r["candidates"]
        self.assertEqual(first["speedup"]["median"], 1.0)
        self.assertEqual(second["speedup"]["pairs"], 4)  # eight blocks: four A B | B A pairs
        ratios = second["speedup"]["ratios"]  # what a gate's sign test counts
        self.assertEqual(len(ratios), 4)
        self.assertEqual(ratios, sorted(ratios))
        self.assertEqual(ratios[0], second["speedup"]["min"])
        self.assertGreater(second["speedup"]["median"], 2.0)
        self.assertLess(second["time_ms"]["median"], first["time_ms"]["median"])
        self.assertEqual(second["time_ms"]["n"], 24)
        self.assertIn("cv", second["time_ms"])

    def test_a_wrong_candidate_fails_the_comparison(self):
        wrong = ("import torch\nclass ModelNew(torch.nn.Module):\n"
                 "    def __init__(self, num_features, eps=1e-5):\n        super().__init__()\n"
                 "    def forward(self, x):\n        return x * 0.5\n")
        r = self.compare([SLOW, wrong], rounds=2, calls_per_block=1)
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EMISMATCH")
        self.assertIn("candidate 2", r["error"])

    def test_a_stale_candidate_fails_the_comparison(self):
        # right on its first calls, then the previous output on every other call: each call's
        # output is checked against the reference of the input set it ran on
        stale = ("import torch\nclass ModelNew(torch.nn.Module):\n"
                 "    def __init__(self, num_features, eps=1e-5):\n        super().__init__()\n"
                 "        self.eps, self.calls, self.last = eps, 0, None\n"
                 "    def forward(self, x):\n        self.calls += 1\n"
                 "        if self.last is not None and self.calls > 4 and self.calls % 2:\n"
                 "            return self.last.clone()\n"
                 "        self.last = x / torch.sqrt(torch.mean(x * x, dim=1, keepdim=True)"
                 " + self.eps)\n        return self.last.clone()\n")
        r = self.compare([SLOW, stale], rounds=2, calls_per_block=3)
        self.assertFalse(r["ok"], r)
        self.assertEqual((r["stage"], r["code"]), ("timing", "ESTALE"), r.get("error"))
        self.assertIn("candidate 2", r["error"])

    def test_bad_requests(self):
        for job in ({"problem": PROBLEM, "candidates": [SLOW]},
                    {"problem": PROBLEM, "candidates": [SLOW, FAST], "rounds": 0},
                    {"problem": PROBLEM, "candidates": [SLOW, FAST], "rounds": 3},
                    {"problem": PROBLEM, "candidates": "x"}):
            reply = self.w.request("compare", job)
            self.assertFalse(reply["ok"])
            self.assertEqual(reply["code"], "EBADREQ")

    def test_sanitize_needs_a_gpu_and_says_so(self):
        reply = self.w.request("sanitize", {"problem": fixture("eval", "relu_problem.py"),
                                            "candidate": fixture("eval", "relu_good.py")})
        self.assertTrue(reply["ok"], reply)
        self.assertIsNone(reply["result"]["ok"])
        self.assertIn("ENOTSUP", reply["result"]["error"])

    def test_a_job_that_asks_for_the_sanitizer_fails_closed_without_one(self):
        r = self.w.job("verify", "relu_problem.py", fixture("eval", "relu_good.py"),
                       sanitize=True)
        self.assertFalse(r["ok"])
        self.assertEqual((r["stage"], r["code"]), ("sanitize", "ESANITIZE"))


if __name__ == "__main__":
    unittest.main()
