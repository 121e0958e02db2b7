"""KernelBench's C++ form in CPU mode: candidates that build with load_inline (cpp_sources),
through a real worker: built before the lease by the compile step (child_compile.py), in the
job's extension cache (ext_build.py), verified and timed like any candidate; a compile error
comes back cut to its errors (compiler_errors.py)."""
import shutil
import tempfile
import unittest

from worker_client import PYTHON, Worker, fixture, fixture_text, planted


def missing_toolchain():
    """Why load_inline cannot build here (a reason to skip), or None."""
    import subprocess
    probe = ("import os, torch.utils.cpp_extension as c\n"
             "print(any(os.path.isfile(os.path.join(p, 'torch', 'extension.h'))\n"
             "          for p in c.include_paths()))\n")
    try:
        out = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return "cannot run %s: %s" % (PYTHON, e)
    if out.stdout.strip() != "True":
        return "torch's C++ headers are not installed (Debian: libtorch-dev)"
    for tool in ("ninja", "c++"):
        if not shutil.which(tool):
            return "no %s on PATH (Debian: ninja-build, g++)" % tool
    return None


class LoadInlineCpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        why = missing_toolchain()
        if why:
            raise unittest.SkipTest(why)
        # a sandbox folder of its own: its cache starts empty, so the first build is cold
        cls.root = tempfile.mkdtemp(prefix="kagent-load-inline-")
        cls.w = Worker("cpu", env={"KAGENT_EVAL_SANDBOX_DIR": cls.root})

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        shutil.rmtree(cls.root, ignore_errors=True)

    def job(self, op, candidate, **extra):
        return self.w.job(op, "relu_problem.py", fixture("eval", candidate), **extra)

    def job_with_fault(self, op, new):
        """cpp_relu_good.py with its ReLU line's zero branch replaced by `new` (a planted fault)."""
        source = planted(fixture_text("eval", "cpp_relu_good.py"), "in[i] : 0.0f;", "in[i] : " + new)
        return self.w.job(op, "relu_problem.py", source)

    def test_a_cpp_candidate_builds_once_verifies_and_is_timed_from_the_cache(self):
        first = self.job("verify", "cpp_relu_good.py")
        self.assertTrue(first["ok"], first.get("error"))
        self.assertEqual(first["trials"], 5)
        self.assertEqual(first["compile"]["cached"], False)
        self.assertEqual([(b["name"], b["cached"]) for b in first["compile"]["builds"]],
                         [("relu_ext", False)])
        # the candidate's own process found every build: its stages add no compile_source
        self.assertEqual(first["stage_s"]["compile_source"], first["compile"]["s"])
        # the build was over before the candidate's process began (a spare takes the GPU's lease
        # at its first gate_shared, a process forked for the job just before it starts)
        began = min(t for stage, t in first["stage_at"].items() if stage != "verdict")
        self.assertLessEqual(first["compile"]["ended"], began)
        # no GPU kernel is profiled on the CPU: no share, and the result says why
        self.assertNotIn("own_share", first)
        self.assertIn("CPU mode", first["own_share_unknown"])
        self.assertEqual(first["library"], "own")

        again = self.job("evaluate", "cpp_relu_good.py", library="any")
        self.assertTrue(again["ok"], again.get("error"))
        self.assertEqual(again["compile"]["cached"], True)
        self.assertEqual([(b["name"], b["cached"]) for b in again["compile"]["builds"]],
                         [("relu_ext", True)])
        self.assertEqual(again["library"], "any")
        self.assertGreater(again["time_ms"]["median"], 0)
        # the cold build's seconds and the cached one's, as the stage records them (the hit is
        # told by its flag above, not by a bound on a busy machine's clock)
        self.assertLess(again["stage_s"]["compile_source"], first["stage_s"]["compile_source"])

    def test_a_compile_error_comes_back_cut_to_its_errors(self):
        r = self.job_with_fault("verify", "zero_value;  // undeclared on purpose")
        self.assertFalse(r["ok"])
        self.assertEqual((r["stage"], r["code"]), ("load", "ECOMPILE"))
        self.assertIn("error: ‘zero_value’ was not declared in this scope", r["error"])
        self.assertIn("zero_value;  // undeclared on purpose", r["error"])  # its source line
        self.assertRegex(r["error"], r"main\.cpp:\d+:\d+: error")
        for noise in ("-isystem", "FAILED:", "ninja:", "[1/2]"):
            self.assertNotIn(noise, r["error"])
        self.assertLess(len(r["error"].splitlines()), 10)
        self.assertIn("compile_source", r["stage_s"])

    def test_a_build_the_step_could_not_make_is_made_by_the_candidate_and_cut_the_same(self):
        # its top level builds only where a GPU could be visible: never in the compile step
        source = ("import os\nimport torch\nfrom torch.utils.cpp_extension import load_inline\n"
                  "if os.environ.get('CUDA_VISIBLE_DEVICES') == '':\n"
                  "    raise RuntimeError('no build without a GPU')\n"
                  "ext = load_inline(name='late_ext', functions=['late'],\n"
                  "                  cpp_sources=['int late() { return missing_name; }'])\n"
                  "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                  "        return x\n")
        r = self.w.job("verify", "relu_problem.py", source)
        self.assertEqual(r["compile"]["builds"], [])
        self.assertEqual((r["stage"], r["code"]), ("load", "ECOMPILE"), r.get("error"))
        self.assertIn("error: ‘missing_name’ was not declared in this scope", r["error"])
        self.assertNotIn("-isystem", r["error"])
        # its own process's build, in the same stage, after the step's
        self.assertGreater(r["stage_s"]["compile_source"], r["compile"]["s"])

    def test_a_wrong_cpp_kernel_is_refused(self):
        r = self.job_with_fault("verify", "0.01f * in[i];")  # a leaky ReLU: wrong below zero
        self.assertFalse(r["ok"])
        self.assertEqual(r["code"], "EMISMATCH")
        self.assertEqual(r["compile"]["builds"][0]["name"], "relu_ext")


class CompileStepSandboxTest(unittest.TestCase):
    """The compile step's child (child_compile.run) as the worker forks it: a candidate's sandbox
    with no GPU, its extension builds in its job's cache entry."""

    def test_the_step_runs_the_top_level_with_no_gpu_visible_and_builds_in_the_job_cache(self):
        from kagent_eval.child import child_compile
        from kagent_eval.sandbox import sandbox
        source = ("import os\n# load_inline\nraise RuntimeError('seen %r %s' % (\n"
                  "    os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('TORCH_EXTENSIONS_DIR')))\n")
        spec = {"problem": fixture("eval", "relu_problem.py"), "candidate": source,
                "dtype": "fp32", "threads": 1, "cuda_arch": None}
        self.assertEqual(sandbox.role_of(child_compile.run), "compile")
        out = sandbox.run_child(child_compile.run, (spec,), {})
        self.assertIsNone(out.failure)
        report, _ = out.first("compiled_sources")
        self.assertEqual(report["builds"], [])
        # the candidate's top level ran, with no GPU visible; what it raised after its builds
        # is the candidate's process's to report, not the step's
        self.assertRegex(report["top_level_error"],
                         r"^RuntimeError: seen '' /\S+/job-\d+-\w+/cache/torch_extensions$")


if __name__ == "__main__":
    unittest.main()
