"""CPU tests of the profiler's Python half: metric sets, launch statistics, aggregation, the ncu
CSV parser, CPU-mode unavailability, and roofline arithmetic against REFERENCE.md section 1.

    /usr/bin/python3 -m unittest tests/eval/test_profiling.py   (or pytest)
"""
import os
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))

from kagent_eval import ncu_cli, ncu_metrics, profiler_lib, profiling, roofline  # noqa: E402

try:
    import torch
except ImportError:  # the pyenv python on PATH has no torch
    torch = None


class MetricSets(unittest.TestCase):
    def test_full_set_is_published_plus_two(self):
        full = profiling.METRIC_SETS["full"]
        self.assertEqual(len(ncu_metrics.PUBLISHED), 27)
        self.assertEqual(len(set(full)), 29)
        self.assertIn("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", full)
        self.assertIn("gpu__time_duration.sum", full)
        for gone in ("smsp__warp_issue_stalled_memory_dependency_per_warp_active.pct",
                     "sm__inst_executed_pipe_fp32.avg.pct_of_peak_sustained_active"):
            self.assertNotIn(gone, full)

    def test_published_set_matches_a_real_trace(self):
        import glob
        import json
        files = glob.glob("/work/shared/data/ka-artifacts/*/round_1/input_ncu_metrics.json")
        if not files:
            self.skipTest("published traces not present")
        with open(files[0]) as f:
            names = set(next(iter(json.load(f)["metrics"].values())))
        self.assertEqual(names, set(ncu_metrics.PUBLISHED))

    def test_sol_set_is_small_and_in_full(self):
        sol = profiling.METRIC_SETS["sol"]
        self.assertLess(len(sol), 10)
        self.assertTrue(set(sol) <= set(profiling.METRIC_SETS["full"]))

    def test_resolve(self):
        self.assertEqual(ncu_metrics.resolve("sol"), ncu_metrics.SOL)
        self.assertEqual(ncu_metrics.resolve("a.sum, b.pct"), ["a.sum", "b.pct"])
        self.assertEqual(ncu_metrics.resolve(None), ncu_metrics.FULL)

    def test_split_launch(self):
        counters, launch = ncu_metrics.split_launch(ncu_metrics.FULL)
        self.assertEqual(len(launch), 5)
        self.assertTrue(all(m.startswith("launch__") for m in launch))
        self.assertEqual(len(counters) + len(launch), 29)


class LaunchStatistics(unittest.TestCase):
    """Values checked against Nsight Compute's own numbers in the published H100 traces."""

    def test_rmsnorm_kernel_of_the_trace(self):
        # 36_RMSNorm round 1: 23 registers, 128 threads, no user shared memory, 32 KB carveout.
        launch = {"block": [128, 1, 1], "registers": 23, "static_shared": 0,
                  "dynamic_shared": 0, "shared_mem_executed": 32768}
        m = ncu_metrics.launch_metrics(launch, (9, 0))
        self.assertEqual(m["launch__registers_per_thread"], 23)
        self.assertEqual(m["launch__shared_mem_per_block_allocated"], 1024)
        self.assertEqual(m["launch__occupancy_limit_blocks"], 32)
        self.assertEqual(m["launch__occupancy_limit_registers"], 21)
        self.assertEqual(m["launch__occupancy_limit_shared_mem"], 32)

    def test_register_heavy_kernel(self):
        # 04 trace: 254 registers -> 2 blocks of 4 warps; 1536 B per block in an 8 KB carveout -> 5
        launch = {"block": [128, 1, 1], "registers": 254, "static_shared": 0,
                  "dynamic_shared": 512, "shared_mem_executed": 8192}
        m = ncu_metrics.launch_metrics(launch, (9, 0))
        self.assertEqual(m["launch__occupancy_limit_registers"], 2)
        self.assertEqual(m["launch__shared_mem_per_block_allocated"], 1536)
        self.assertEqual(m["launch__occupancy_limit_shared_mem"], 5)


class Aggregation(unittest.TestCase):
    rows = [
        {"name": "a", "duration_ms": 3.0, "metrics": {
            "dram__bytes_read.sum": 100.0, "sm__throughput.avg.pct_of_peak_sustained_elapsed": 90.0,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 10.0,
            "dram__bytes.sum.per_second": 4.0, "launch__registers_per_thread": 32}},
        {"name": "b", "duration_ms": 1.0, "metrics": {
            "dram__bytes_read.sum": 50.0, "sm__throughput.avg.pct_of_peak_sustained_elapsed": 10.0,
            "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 70.0,
            "dram__bytes.sum.per_second": 8.0, "launch__registers_per_thread": 64}},
    ]

    def test_counters_add_and_rates_are_time_weighted(self):
        agg = ncu_metrics.aggregate(self.rows)
        self.assertEqual(agg["dram__bytes_read.sum"], 150.0)
        self.assertAlmostEqual(agg["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 70.0)
        self.assertAlmostEqual(agg["dram__bytes.sum.per_second"], 5.0)  # (4*3 + 8*1) / 4
        self.assertAlmostEqual(agg["launch__registers_per_thread"], 40.0)

    def test_max_sol_is_kept_apart(self):
        agg = ncu_metrics.aggregate(self.rows)
        # compute SOL 70, memory SOL (10*3+70)/4 = 25
        self.assertAlmostEqual(ncu_metrics.max_sol_pct(agg), 70.0)
        self.assertIsNone(ncu_metrics.max_sol_pct({}))

    def test_repeated_kernel_is_one_entry(self):
        rows = self.rows + [dict(self.rows[0])]
        by_name = ncu_metrics.by_kernel_name(rows)
        self.assertEqual(sorted(by_name), ["a", "b"])
        self.assertEqual(by_name["a"]["dram__bytes_read.sum"], 200.0)

    def test_missing_values_are_skipped(self):
        rows = [{"name": "a", "duration_ms": 1.0, "metrics": {"x.pct": None}}]
        self.assertEqual(ncu_metrics.aggregate(rows), {})


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


class CpuMode(unittest.TestCase):
    @unittest.skipIf(torch is None, "torch not installed")
    def test_unavailable_with_a_reason(self):
        if torch.cuda.is_available():
            self.skipTest("a GPU is present")
        ok, reason = profiling.available(0)
        self.assertFalse(ok)
        self.assertTrue(reason.startswith("ENOTSUP: "), reason)
        with self.assertRaises(profiling.ProfilerError) as ctx:
            profiling.profile(lambda: None, "sol", 0)
        self.assertEqual(ctx.exception.code, "ENOTSUP")
        with self.assertRaises(profiling.ProfilerError):
            profiling.trace_kernels(lambda: None, 0)
        with self.assertRaises(profiling.ProfilerError) as ctx:
            profiling.profile_any(lambda: None, "sol", 0, problem_path="p.py")
        self.assertEqual(ctx.exception.code, "ENOTSUP")

    def test_missing_library_is_enotsup(self):
        saved = os.environ.get("KAGENT_PROF_LIB")
        os.environ["KAGENT_PROF_LIB"] = "/nonexistent/libkagent_prof.so"
        try:
            self.assertEqual(profiler_lib.library_candidates(), ["/nonexistent/libkagent_prof.so"])
        finally:
            if saved is None:
                del os.environ["KAGENT_PROF_LIB"]
            else:
                os.environ["KAGENT_PROF_LIB"] = saved


class FakeProfLib:
    """A fake libkagent_prof: records kp_* calls, refuses the replay modes in `refuse`, and
    answers kp_profile_end with one range per launch (plus `extra` leading ranges)."""

    path = "fake"

    def __init__(self, n_launches, refuse=(), extra=0):
        self.n, self.refuse, self.extra = n_launches, set(refuse), extra
        self.calls = []
        self.mode = None

    def call(self, name, *args):
        self.calls.append((name, args))
        if name == "kp_profile_begin":
            self.mode = args[2]
            if self.mode in self.refuse:
                raise profiling.ProfilerError("ECUPTI", "fake refuses mode %d" % self.mode)
        if name == "kp_profile_pass_end":
            args[0]._obj.value = 1

    def result(self):
        ranges = [{"range": str(i), "metrics": {"gpu__time_duration.sum": 1000.0 + i}}
                  for i in range(self.n + self.extra)]
        return {"passes": 1, "dropped": 0, "ranges": ranges}


class FakeTorch:
    """Stands in for torch where the replay loop only synchronizes (and a profile asks for the
    device's capability)."""

    class cuda:
        @staticmethod
        def synchronize():
            pass

        @staticmethod
        def get_device_capability(index):
            return (9, 0)


class ReplayModes(unittest.TestCase):
    def test_chain_falls_back_towards_kernel_replay(self):
        self.assertEqual(profiling.replay_chain("user"), ["user", "user-pass", "kernel"])
        self.assertEqual(profiling.replay_chain("user-pass"), ["user-pass", "kernel"])
        self.assertEqual(profiling.replay_chain("kernel"), ["kernel"])
        with self.assertRaises(profiling.ProfilerError):
            profiling.replay_chain("bogus")

    def test_modes_match_the_c_abi(self):
        with open(os.path.join(ROOT, "src/gpu/profiler/include/kagent_prof.h")) as f:
            header = f.read()
        self.assertIn("KP_REPLAY_KERNEL = 0, KP_REPLAY_USER = 1, KP_REPLAY_USER_SWEEP = 2",
                      header)
        self.assertEqual(profiling.REPLAY_MODES, {"kernel": 0, "user-pass": 1, "user": 2})

    def test_user_mode_leaves_the_sweep_to_the_library(self):
        lib = FakeProfLib(3)
        runs = []
        ranges, passes, sessions, first_pass_s = profiling._replay(
            FakeTorch, lib, lambda: runs.append(1), ["gpu__time_duration.sum"], 3, "user", 0, 4)
        begin = [a for n, a in lib.calls if n == "kp_profile_begin"][0]
        self.assertEqual(begin[2], 2)
        self.assertGreaterEqual(begin[1], 2 * 3)  # room for a sweep range before each launch
        self.assertEqual((len(ranges), sessions, len(runs)), (3, 1, 1))
        self.assertGreaterEqual(first_pass_s, 0.0)

    def test_user_pass_mode_sweeps_in_python_and_drops_its_ranges(self):
        class FakeFlush:
            kernels = 2
            calls = 0

            def __call__(self):
                FakeFlush.calls += 1
        saved = profiling._flusher
        profiling._flusher = lambda torch_, dev: FakeFlush()
        try:
            lib = FakeProfLib(3, extra=2)
            ranges, _, _, _ = profiling._replay(FakeTorch, lib, lambda: None,
                                                ["gpu__time_duration.sum"], 3, "user-pass", 0, 4)
        finally:
            profiling._flusher = saved
        self.assertEqual(lib.mode, 1)
        self.assertEqual(FakeFlush.calls, 1)
        self.assertEqual([r["range"] for r in ranges], ["2", "3", "4"])

H100_PEAKS = {"dram_bytes_per_s": 3.0e12, "flops_per_s": {"bf16": 7.0e14, "fp32": 5.0e13}}


@unittest.skipIf(torch is None, "torch not installed")
class Roofline(unittest.TestCase):
    """Bounds of the five showcase problems against REFERENCE.md section 1 (bf16, 3.0 TB/s)."""

    def bf16(self, *shape):
        return torch.empty(*shape, dtype=torch.bfloat16, device="meta")

    def check(self, inputs, output, params, ref_gb, ref_ms, nflops=0):
        nbytes = roofline.compulsory_bytes(inputs, output, params)
        self.assertLess(abs(nbytes / 1e9 - ref_gb) / ref_gb, 0.02, nbytes)
        r = roofline.roofline(nbytes, nflops, H100_PEAKS, measured_ms=2 * ref_ms)
        self.assertLess(abs(r["lower_bound_ms"] - ref_ms) / ref_ms, 0.02, r)
        self.assertEqual(r["binding"], "memory")
        self.assertAlmostEqual(r["sol_pct"], r["lower_bound_ms"] / (2 * ref_ms) * 100)
        return r

    def test_4_gemv(self):
        self.check([self.bf16(2048, 1048576), self.bf16(1048576, 1)], self.bf16(2048, 1), [],
                   4.30, 1.43, nflops=2 * 2048 * 1048576)

    def test_36_rmsnorm(self):
        self.check([self.bf16(112, 64, 512, 512)], self.bf16(112, 64, 512, 512), [], 7.52, 2.51)

    def test_43_maxpool(self):
        self.check([self.bf16(16, 32, 128, 128, 128)], self.bf16(16, 32, 62, 62, 62), [],
                   2.39, 0.80)

    def test_77_conv_transpose_counts_the_full_output(self):
        conv = torch.nn.ConvTranspose3d(32, 64, 3, stride=2, padding=1, dilation=2, bias=False)
        x = torch.zeros(1, 32, 16, 32, 32)
        out = conv(x)
        self.assertEqual(tuple(out.shape[2:]), (33, 65, 65))
        nflops = roofline.analytic_flops(conv, [self.bf16(16, 32, 16, 32, 32)], out)
        self.assertEqual(nflops, 2 * 16 * 32 * 16 * 32 * 32 * 64 * 27)
        self.check([self.bf16(16, 32, 16, 32, 32)], self.bf16(16, 64, 33, 65, 65),
                   [conv.to(torch.bfloat16)], 0.30, 0.10, nflops=nflops)

    def test_82_depthwise(self):
        conv = torch.nn.Conv2d(64, 64, 3, groups=64, bias=False).to(torch.bfloat16)
        self.check([self.bf16(16, 64, 512, 512)], self.bf16(16, 64, 510, 510), [conv],
                   1.07, 0.36)

    def test_compute_bound_case(self):
        r = roofline.roofline(1e9, 1e15, H100_PEAKS, measured_ms=None)
        self.assertEqual(r["binding"], "compute")
        self.assertIsNone(r["sol_pct"])
        self.assertAlmostEqual(r["compute_bound_ms"], 1e15 / 7.0e14 * 1e3)

    def test_flops_of_a_small_conv(self):
        conv = torch.nn.Conv2d(4, 8, 3, bias=False)
        x = torch.randn(2, 4, 10, 10)
        self.assertEqual(roofline.flops(conv, [x]), 2 * 2 * 8 * 8 * 8 * 4 * 9)

    def test_peaks_are_cached_in_memory(self):
        roofline._PEAKS["Fake GPU"] = {"dram_bytes_per_s": 1.0}
        try:
            self.assertIn("Fake_GPU", roofline._cache_path("Fake GPU"))
        finally:
            del roofline._PEAKS["Fake GPU"]


if __name__ == "__main__":
    unittest.main()

