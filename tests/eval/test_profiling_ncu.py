"""CPU tests of the ncu backend: its CSV parser, a run around a FAKE ncu, and the GPU check's
agreement rule between the profiler and ncu (tests/gpu/profile_gpu_check.py).
Run alone: /usr/bin/python3 -m unittest tests/eval/test_profiling_ncu.py"""
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

from kagent_eval.profile import ncu_cli, ncu_metrics  # noqa: E402


RAW_CSV = '''==PROF== Connected to process 1234 (/usr/bin/python3)
==PROF== Profiling "_scale_shift_kernel": 0%....50%....100% - 13 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread"
"","","","","","","","","","","","byte","nsecond","%","register/thread"
"0","1234","python3","host","_scale_shift_kernel","1","7","(1024, 1, 1)","(65536, 1, 1)","0","9.0","134,217,728","125,440","12.5","16"
"1","1234","python3","host","_row_sum_kernel","1","7","(128, 1, 1)","(8192, 1, 1)","0","9.0","134,225,920","62,720","40.25","n/a"
==PROF== Disconnected from process 1234
'''

LONG_CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","k0","1","7","(128, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,000"
"0","1","python3","h","k0","1","7","(128, 1, 1)","(10, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","4096"
"1","1","python3","h","k1","1","7","(64, 1, 1)","(5, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","1,000"
'''


class NcuCsv(unittest.TestCase):
    def test_raw_page(self):
        rows = ncu_cli.parse_csv(RAW_CSV)
        self.assertEqual([r["name"] for r in rows], ["_scale_shift_kernel", "_row_sum_kernel"])
        self.assertEqual(rows[0]["block"], [1024, 1, 1])
        self.assertEqual(rows[0]["grid"], [65536, 1, 1])
        self.assertEqual(rows[0]["stream"], 7)
        self.assertEqual(rows[0]["metrics"]["dram__bytes_read.sum"], 134217728.0)
        self.assertNotIn("launch__registers_per_thread", rows[1]["metrics"])  # n/a

    def test_details_page(self):
        rows = ncu_cli.parse_csv(LONG_CSV)
        self.assertEqual([r["name"] for r in rows], ["k0", "k1"])
        self.assertEqual(rows[0]["metrics"], {"gpu__time_duration.sum": 2000.0,
                                              "dram__bytes_read.sum": 4096.0})

    def test_result_shape_matches_cupti_result(self):
        rows = ncu_cli.parse_csv(RAW_CSV)
        res = ncu_cli.result_from_rows(rows, ["dram__bytes_read.sum", "gpu__time_duration.sum",
                                              "lts__t_sector_hit_rate.pct"], 9.5)
        self.assertEqual(res["backend"], "ncu")
        self.assertEqual(sorted(res["metrics"]), ["_row_sum_kernel", "_scale_shift_kernel"])
        self.assertAlmostEqual(res["total_ms"], 0.18816)
        self.assertEqual(res["aggregate"]["dram__bytes_read.sum"], 268443648.0)
        # weighted by time: (12.5 * 125440 + 40.25 * 62720) / 188160
        self.assertAlmostEqual(res["aggregate"][ncu_metrics.COMPUTE_SOL], 21.75)
        self.assertEqual(res["unsupported"], ["lts__t_sector_hit_rate.pct"])
        for key in ("metrics", "kernels", "aggregate", "passes", "backend", "ncu_max_sol_pct"):
            self.assertIn(key, res)

    def test_command_does_not_lock_clocks(self):
        argv = ncu_cli.ncu_command(["a.sum", "b.pct"], ["python3", "t.py"], ncu="ncu")
        self.assertEqual(argv[argv.index("--clock-control") + 1], "none")
        self.assertEqual(argv[argv.index("--metrics") + 1], "a.sum,b.pct")
        self.assertEqual(argv[-2:], ["python3", "t.py"])


    def test_extra_options_go_before_the_target(self):
        argv = ncu_cli.ncu_command(["a.sum"], ["python3", "t.py"], ncu="ncu",
                                   extra=["--replay-mode", "application"])
        self.assertEqual(argv[-4:], ["--replay-mode", "application", "python3", "t.py"])

    def test_passes_from_log(self):
        self.assertEqual(ncu_cli.passes_from_log(RAW_CSV), 13)
        one = "==PROF== Connected to process 5 (/usr/bin/python3)\n==PROF== Disconnected from process 5\n"
        self.assertIsNone(ncu_cli.passes_from_log(one))
        self.assertEqual(ncu_cli.passes_from_log(one * 4), 4)  # application replay


FAKE_NCU = """#!/bin/sh
# Fake ncu for tests: records its arguments and prints a canned report of three launches.
echo "$@" >> "$FAKE_NCU_ARGS"
echo '==PROF== Profiling "fill": 0%....50%....100% - 12 passes' >&2
cat <<'CSV'
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_write.sum","gpu__time_duration.sum"
"","","","","","","","","","","","byte","nsecond"
"0","1","python3","h","fill","1","7","(128, 1, 1)","(1, 1, 1)","0","9.0","2,500,000","1,500"
"1","1","python3","h","k0","1","7","(128, 1, 1)","(10, 1, 1)","0","9.0","4096","2,000"
"2","1","python3","h","k1","1","7","(64, 1, 1)","(5, 1, 1)","0","9.0","0","1,000"
CSV
"""


class NcuRun(unittest.TestCase):
    """profile_with_ncu around a fake ncu: options passed, pre-roll launches dropped."""

    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp()
        self.ncu = os.path.join(self.dir, "ncu")
        with open(self.ncu, "w") as f:
            f.write(FAKE_NCU)
        os.chmod(self.ncu, 0o755)
        self.args = os.path.join(self.dir, "args")
        self.env = {k: os.environ.get(k) for k in ("KAGENT_NCU", "FAKE_NCU_ARGS")}
        os.environ.update(KAGENT_NCU=self.ncu, FAKE_NCU_ARGS=self.args)

    def tearDown(self):
        import shutil
        for k, v in self.env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.dir)

    def test_preroll_launches_are_dropped(self):
        res = ncu_cli.profile_with_ncu("p.py", "c.py", {"preroll": 1},
                                       "dram__bytes_write.sum,gpu__time_duration.sum",
                                       ncu_args=["--replay-mode", "application"])
        self.assertEqual([k["name"] for k in res["kernels"]], ["k0", "k1"])
        self.assertEqual(res["kernels"][0]["metrics"]["dram__bytes_write.sum"], 4096.0)
        self.assertEqual(res["passes"], 12)
        with open(self.args) as f:
            self.assertIn("--replay-mode application", f.read())

    def test_without_preroll_every_launch_is_kept(self):
        res = ncu_cli.profile_with_ncu("p.py", None, {}, "gpu__time_duration.sum")
        self.assertEqual([k["name"] for k in res["kernels"]], ["fill", "k0", "k1"])


class ProfileCheckRule(unittest.TestCase):
    """The GPU check's agreement rule (tests/gpu/profile_gpu_check.py), on made-up runs."""

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
        import profile_gpu_check
        cls.check = profile_gpu_check

    @staticmethod
    def runs(*values):
        return [{"kernels": [{"name": "k", "metrics": {"x.sum": a, "y.pct": b}}]}
                for a, b in values]

    def test_medians_within_tolerance_pass_strictly(self):
        ok, consistent, rows = self.check.compare_runs(self.runs((100, 50), (104, 51), (90, 49)),
                                                       self.runs((102, 52), (101, 50), (99, 51)))
        self.assertTrue(ok)
        self.assertTrue(consistent)

    def test_off_median_counts_only_within_the_references_own_spread(self):
        # ncu's runs of x.sum span 100..130: a median 20 away is within that spread
        ok, consistent, rows = self.check.compare_runs(self.runs((100, 50), (100, 50)),
                                                       self.runs((100, 50), (130, 50), (120, 50)))
        self.assertFalse(ok)
        self.assertTrue(consistent)
        # ncu repeats tightly (spread 2): the same 20 is a real disagreement
        ok, consistent, rows = self.check.compare_runs(self.runs((100, 50), (100, 50)),
                                                       self.runs((120, 50), (121, 50), (119, 50)))
        self.assertFalse(ok)
        self.assertFalse(consistent)
        bad = [r for r in rows if not r["within_ncu_spread"]]
        self.assertEqual([r["metric"] for r in bad], ["x.sum"])

    def test_percentages_use_points(self):
        ok, consistent, _ = self.check.compare_runs(self.runs((1, 50)), self.runs((1, 53.5)))
        self.assertFalse(ok)
        self.assertFalse(consistent)
        ok, _, _ = self.check.compare_runs(self.runs((1, 50)), self.runs((1, 52.9)))
        self.assertTrue(ok)

    def test_a_missing_launch_fails(self):
        two = [{"kernels": self.runs((1, 1))[0]["kernels"] * 2}]
        ok, consistent, _ = self.check.compare_runs(self.runs((1, 1)), two)
        self.assertFalse(ok)
        self.assertFalse(consistent)


if __name__ == "__main__":
    unittest.main()
