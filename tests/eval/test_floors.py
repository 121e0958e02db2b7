"""The evaluator's floors (src/gpu/eval/README.md, "Files"): every module of kagent_eval has a role,
and imports between roles keep what runs beside candidate code apart from what judges it
(floor_check.py reads the imports; docs: issue 56's floor plan, without folders yet).

Rules: no import circle; a child module (forked beside candidate code) imports no judge or worker
module; only worker modules and the entry points import worker modules, and only entry points
import entry points. The map below is the one statement of each module's role: a new module
fails the test until it is placed, and the README's list of files is checked against it."""
import os
import re
import shutil
import tempfile
import textwrap
import unittest

import floor_check

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(ROOT, "src", "gpu", "eval", "kagent_eval")
README = os.path.join(ROOT, "src", "gpu", "eval", "README.md")

# What Lua and a shell start (kagent_eval.worker, kagent-eval check) and the package itself.
ENTRY_POINTS = ("__init__", "__main__", "oneshot", "worker")

FLOORS = {
    # the trusted orchestration: never runs candidate code; forks the children, holds the lease
    "worker": ("__init__", "__main__", "oneshot", "worker", "jobs", "job_spec", "job_gates",
               "remeasure", "reference", "spare", "lease", "stage_lease", "device_share",
               "compare_op", "sanitize_op", "compile_step", "noise", "host_load"),
    # the verdicts, in the worker, from the children's data (numpy; never imports torch)
    "judge": ("compare", "value_errors", "shadow_judge", "shadow_range", "likely_cause",
              "verdict", "verdict_library", "timed_verdict", "review_verdict", "trust", "audit",
              "static_checks", "early_checks"),
    # what runs in the forked processes beside candidate code: it produces data, judges nothing
    "child": ("child_candidate", "child_reference", "child_common", "child_compile",
              "candidate_timing", "fresh_probe", "compile_gate", "warmup", "interleave", "shadow",
              "unleased_compile", "ext_build", "compiler_errors"),
    # the fork server and the jail every child enters
    "sandbox": ("sandbox", "jail", "landlock", "namespaces", "capabilities", "syscall_filter",
                "job_cgroup", "job_view", "sandbox_limits", "sandbox_status", "shm_sweep",
                "process_watch", "candidate_cache", "reaper", "envpolicy"),
    # profiles, peaks and rooflines, compute-sanitizer, the Python profile of a job
    "profile": ("profiling", "profiler_lib", "profiler_error", "ncu_cli", "ncu_metrics",
                "ncu_target", "roofline", "peaks", "sanitizer", "pyprofile"),
    # the analyze op: a problem's traced graph, its ops, Inductor's kernels, merged sources
    "analyze": ("analyze", "analyze_problem", "fx_forms", "fx_graph", "fx_module_calls",
                "fx_ops", "fx_trace", "inductor_kernel", "integrate", "source_merge"),
    # what both sides read: the wire format, digests, inputs, loading, defaults, timing primitives
    "common": ("wire", "digest", "inputs", "loader", "job_defaults", "timing", "stop_rule",
               "stream_check", "cuda_driver", "gpu_memory", "fingerprint", "request",
               "timed_inputs", "cache_rule", "extra_trials", "in_model"),
}
ROLES = {m: role for role, members in FLOORS.items() for m in members}


class FloorsTest(unittest.TestCase):
    def test_map_names_each_module_once(self):
        listed = [m for members in FLOORS.values() for m in members]
        self.assertEqual(sorted(m for m in set(listed) if listed.count(m) > 1), [],
                         "a module on two floors")

    def test_kagent_eval_keeps_its_floors(self):
        found = floor_check.problems(PACKAGE, ROLES, ENTRY_POINTS)
        print("\nkagent_eval by floor (test_floors.py):")
        for line in floor_check.role_counts(PACKAGE, ROLES):
            print("  " + line)
        self.assertEqual(found, [], "\n".join(["the evaluator's floor plan is broken:"] + found))


class CheckerTest(unittest.TestCase):
    """floor_check on FAKE packages in a temp folder: each planted fault must be found."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="floors-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.pkg = os.path.join(self.dir, "fakepkg")
        os.mkdir(self.pkg)
        self.roles = {"__init__": "worker", "worker": "worker", "jobs": "worker",
                      "verdict": "judge", "child": "child", "wire": "common"}
        self.write({"__init__": '"""FAKE package."""\n',
                    "worker": "from . import jobs, wire\n",
                    "jobs": "from . import child, verdict\n",
                    "verdict": "from .wire import send\n",
                    "child": "from . import wire\n\n\ndef run():\n    return wire\n",
                    "wire": "def send():\n    pass\n"})

    def write(self, sources):
        for name, text in sources.items():
            with open(os.path.join(self.pkg, name + ".py"), "w") as f:
                f.write(textwrap.dedent(text))

    def problems(self):
        return floor_check.problems(self.pkg, self.roles, ("__init__", "worker"))

    def test_a_sound_package_passes(self):
        self.assertEqual(self.problems(), [])

    def test_a_planted_upward_import_fails(self):
        self.write({"child": "def run():\n    from .verdict import fail  # lazy, still read\n"})
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("child.py:2 imports verdict (lazily): a child module", found[0])

    def test_a_planted_circle_fails_and_is_printed(self):
        self.write({"wire": "import fakepkg.verdict\n"})  # verdict -> wire -> verdict
        found = self.problems()
        self.assertIn("import circle: verdict -> wire -> verdict", found)

    def test_a_child_importing_the_worker_fails(self):
        self.write({"child": "from fakepkg.jobs import run\n"})
        found = self.problems()
        self.assertTrue(any("child.py:1 imports jobs" in p and "a child module" in p
                            for p in found), found)
        self.assertTrue(any("only worker modules and entry points" in p for p in found), found)

    def test_only_entry_points_import_the_worker(self):
        self.write({"verdict": "from . import jobs\n"})
        found = self.problems()
        self.assertTrue(any("verdict.py:1 imports jobs: only worker modules" in p
                            for p in found), found)
        self.assertTrue(any("import circle: jobs -> verdict -> jobs" in p for p in found), found)

    def test_an_unmapped_module_fails_with_its_name(self):
        self.write({"newcomer": "from . import wire\n"})
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("no role in the floor map", found[0])
        self.assertIn("newcomer", found[0])

    def test_a_heavy_package_init_fails(self):
        self.write({"__init__": "from . import wire\n"})
        self.assertTrue(any("must stay light" in p for p in self.problems()))


class ReadmeFilesTest(unittest.TestCase):
    """The README's "Files" lists every module once, under its floor's heading."""

    def test_every_module_listed_under_its_floor(self):
        with open(README, encoding="utf-8") as f:
            text = f.read()
        section = text.split("\n## Files\n", 1)[1].split("\n## ", 1)[0]
        listed, role = {}, None
        for line in section.splitlines():
            head = re.match(r"^\*\*(\w+)\*\*", line)
            if head:
                role = head.group(1)
                continue
            item = re.match(r"^- `(\w+)\.py`", line)
            if item:
                listed.setdefault(item.group(1), []).append(role)
        wrong = ["%s.py: listed under %s, its floor is %s" % (m, "/".join(map(str, listed[m])),
                                                                ROLES.get(m))
                 for m in sorted(listed) if listed[m] != [ROLES.get(m)]]
        missing = sorted(set(floor_check.modules_of(PACKAGE)) - set(listed))
        self.assertEqual(wrong + ["%s.py: not listed" % m for m in missing], [],
                         "src/gpu/eval/README.md, Files: one line `- `name.py` ...` per module, "
                         "under its floor's **role** line (tests/eval/test_floors.py)")


if __name__ == "__main__":
    unittest.main()
