"""How compute-sanitizer's tools are run (sanitizer.run_tools), with a FAKE compute-sanitizer
(tests/fixtures/fake_compute_sanitizer) that answers as each test's plan says: racecheck's
verdict on the shrunk problem stands only where it ran the kernels memcheck ran as stated, and
every other case checks the problem as stated; and the sizes racecheck shrinks the problem to."""
import json
import os
import sys
import tempfile
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "gpu", "eval"))
from kagent_eval.common import inputs  # noqa: E402
from kagent_eval.profile import sanitizer  # noqa: E402

FAKE = os.path.join(HERE, "..", "fixtures", "fake_compute_sanitizer", "compute-sanitizer")
JOB = {"problem": "p.py", "candidate": "c.py", "dtype": "bf16", "seed": 0, "device": 0,
       "warmup": 0}


class RunTools(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.plan = os.path.join(self.dir.name, "plan.json")
        self.addCleanup(self.dir.cleanup)
        env = mock.patch.dict(os.environ, KAGENT_COMPUTE_SANITIZER=FAKE,
                              FAKE_SANITIZER_PLAN=self.plan)
        env.start()
        self.addCleanup(env.stop)

    def run_plan(self, plan, tools=("memcheck", "racecheck")):
        with open(self.plan, "w") as f:
            json.dump(plan, f)
        out = sanitizer.run_tools(list(tools), dict(JOB), 60, sys.executable)
        with open(self.plan + ".log") as f:
            runs = sorted(line.strip() for line in f)
        return out, runs

    def test_the_shrunk_racecheck_stands_where_it_ran_the_same_kernels(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1"},
            "racecheck_shrunk": {"compiled": "k1", "sizes": {"K": 65536}}})
        self.assertEqual(runs, ["memcheck full", "racecheck shrunk"])
        self.assertEqual(out["racecheck"]["sizes"], {"K": 65536})
        self.assertEqual(out["memcheck"]["sizes"], {})
        self.assertTrue(out["racecheck"]["ok"] and out["memcheck"]["ok"])

    def test_other_kernels_when_shrunk_mean_racecheck_as_stated(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1"},
            "racecheck_shrunk": {"compiled": "k2", "sizes": {"K": 65536}},
            "racecheck": {"compiled": "k1", "errors": 3}})
        self.assertEqual(runs, ["memcheck full", "racecheck full", "racecheck shrunk"])
        race = out["racecheck"]
        self.assertIs(race["ok"], False, "the verdict is the full-size run's")
        self.assertEqual(race["errors"], 3)
        self.assertEqual(race["sizes"], {})
        self.assertEqual(race["shrunk"]["sizes"], {"K": 65536})
        self.assertEqual(race["shrunk"]["compiled"], "k2")

    def test_hazards_found_shrunk_in_the_same_kernels_reject(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1"},
            "racecheck_shrunk": {"compiled": "k1", "sizes": {"K": 65536}, "errors": 2}})
        self.assertEqual(runs, ["memcheck full", "racecheck shrunk"])
        self.assertIs(out["racecheck"]["ok"], False)

    def test_no_triton_code_means_racecheck_as_stated(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": None},
            "racecheck_shrunk": {"compiled": None, "sizes": {"K": 65536}}})
        self.assertEqual(runs, ["memcheck full", "racecheck full", "racecheck shrunk"])
        self.assertEqual(out["racecheck"]["sizes"], {})
        self.assertTrue(out["racecheck"]["ok"])

    def test_a_shrunk_forward_that_fails_means_racecheck_as_stated(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1"},
            "racecheck_shrunk": {"fails": 1},
            "racecheck": {"compiled": "k1"}})
        self.assertEqual(runs, ["memcheck full", "racecheck full", "racecheck shrunk"])
        self.assertTrue(out["racecheck"]["ok"])
        self.assertIsNone(out["racecheck"]["shrunk"]["ok"])
        self.assertIsNone(out["racecheck"]["shrunk"]["sizes"])

    def test_a_report_that_is_not_json_counts_as_none(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1"},
            "racecheck_shrunk": {"garbage": True},
            "racecheck": {"compiled": "k1"}})
        self.assertEqual(runs, ["memcheck full", "racecheck full", "racecheck shrunk"])
        self.assertTrue(out["racecheck"]["ok"])
        self.assertEqual(out["racecheck"]["sizes"], {})

    def test_memcheck_errors_reject_without_checking_races_again(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1", "errors": 1},
            "racecheck_shrunk": {"compiled": "k2", "sizes": {"K": 65536}}})
        self.assertEqual(runs, ["memcheck full", "racecheck shrunk"])
        self.assertIs(out["memcheck"]["ok"], False)

    def test_a_tool_that_could_not_judge_beside_the_other_runs_again_alone(self):
        out, runs = self.run_plan({
            "memcheck": {"compiled": "k1", "fails": 1},
            "racecheck_shrunk": {"compiled": "k1", "sizes": {"K": 65536}}})
        self.assertEqual(runs, ["memcheck full", "memcheck full", "racecheck shrunk"])
        self.assertTrue(out["memcheck"]["ok"])
        self.assertTrue(out["racecheck"]["ok"])

    def test_one_that_cannot_judge_alone_either_is_reported_so(self):
        out, _ = self.run_plan({"memcheck": {"fails": 2},
                                "racecheck_shrunk": {"compiled": "k1", "sizes": {"K": 65536}}})
        self.assertIsNone(out["memcheck"]["ok"])

    def test_racecheck_alone_checks_the_problem_as_stated(self):
        out, runs = self.run_plan({"racecheck": {"compiled": "k1"}}, tools=("racecheck",))
        self.assertEqual(runs, ["racecheck full"])
        self.assertEqual(out["racecheck"]["sizes"], {})


def problem(**sizes):
    """A problem module whose get_inputs reads the given size constants (and get_init_inputs
    reads `features`)."""
    src = "def get_inputs():\n    return [%s]\n\ndef get_init_inputs():\n    return [features]\n" % (
        ", ".join(sorted(sizes)) or "")
    module = types.ModuleType("problem")
    exec(compile(src, "problem.py", "exec"), module.__dict__)
    module.__dict__.update(sizes)
    module.features = 64
    return module


class ShrunkSizes(unittest.TestCase):
    def test_the_largest_constants_are_halved_until_the_work_is_a_sixteenth(self):
        self.assertEqual(inputs.shrunk_sizes(problem(M=2048, K=1048576), 16), {"K": 65536})
        self.assertEqual(inputs.shrunk_sizes(problem(batch_size=112, dim1=512, dim2=512), 16),
                         {"dim1": 128, "dim2": 128})

    def test_sizes_stay_multiples_of_16_and_at_least_64(self):
        self.assertEqual(inputs.shrunk_sizes(problem(N=4096 + 16, B=128), 16), {"B": 64})
        self.assertEqual(inputs.shrunk_sizes(problem(N=100, B=96), 16), {})
        for v in inputs.shrunk_sizes(problem(A=3 * 2048, B=768, C=2048), 16).values():
            self.assertEqual(v % 16, 0)
            self.assertGreaterEqual(v, 64)

    def test_constructor_constants_are_left_alone(self):
        self.assertNotIn("features", inputs.shrunk_sizes(problem(N=1024), 16))


if __name__ == "__main__":
    unittest.main()
