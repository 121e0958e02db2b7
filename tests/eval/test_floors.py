"""The evaluator's floors (src/gpu/eval/README.md, "Files"): kagent_eval's modules live in one
folder per floor, and imports between floors keep what runs beside candidate code apart from what
judges it (floor_check.py reads the imports, lazy ones too; issue 56's floor plan).

Rules: no import circle; a child/ module (forked beside candidate code) imports nothing of judge/
or worker/; only worker/ modules and the entry points import worker/, and only entry points
import entry points; every __init__ stays light at load; no module outside the floors' folders
but the package's own __init__ and __main__. A module's floor is its folder: there is no other
map. The README's list of files is checked against the folders."""
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

# What Lua and a shell start (python -m kagent_eval.worker, kagent-eval check, the console
# scripts of pyproject.toml) and the package itself.
ENTRY_POINTS = ("__init__", "__main__", "worker/__main__", "worker/main", "worker/oneshot")


class FloorsTest(unittest.TestCase):
    def test_kagent_eval_keeps_its_floors(self):
        found = floor_check.problems(PACKAGE, ENTRY_POINTS)
        print("\nkagent_eval by floor (test_floors.py):")
        for line in floor_check.floor_counts(PACKAGE):
            print("  " + line)
        self.assertEqual(found, [], "\n".join(["the evaluator's floor plan is broken:"] + found))

    def test_the_entry_points_exist(self):
        modules = floor_check.modules_of(PACKAGE)
        self.assertEqual([e for e in ENTRY_POINTS if e not in modules], [])

    def test_the_sandbox_names_children_that_exist(self):
        # role_of matches "module.function" names: a moved child must keep its jail role
        import importlib
        from kagent_eval.sandbox import sandbox
        for name in sorted(sandbox.TRUSTED_TARGETS | sandbox.NO_GPU_TARGETS):
            module, function = name.rsplit(".", 1)
            target = getattr(importlib.import_module(module), function, None)
            self.assertIsNotNone(target, name)
            self.assertNotEqual(sandbox.role_of(target), "candidate", name)


class CheckerTest(unittest.TestCase):
    """floor_check on FAKE packages in a temp folder: each planted fault must be found."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="floors-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.pkg = os.path.join(self.dir, "fakepkg")
        self.write({"__init__": '"""FAKE package."""\n'})
        self.write({f + "/__init__": '"""FAKE floor %s."""\n' % f
                    for f in ("worker", "judge", "child", "common")})
        self.write({"worker/main": "from . import jobs\nfrom ..common import wire\n",
                    "worker/jobs": "from ..child import run\nfrom ..judge import verdict\n",
                    "judge/verdict": "from ..common.wire import send\n",
                    "child/run": "from ..common import wire\n\n\ndef run():\n    return wire\n",
                    "common/wire": "def send():\n    pass\n"})

    def write(self, sources):
        """FAKE modules, each given a docstring first (the checker asks every module for one)."""
        for name, text in sources.items():
            path = os.path.join(self.pkg, name + ".py")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            text = textwrap.dedent(text)
            with open(path, "w") as f:
                f.write(text if text.startswith('"""') else '"""FAKE %s."""\n%s' % (name, text))

    def write_bare(self, name, text):
        with open(os.path.join(self.pkg, name + ".py"), "w") as f:
            f.write(text)

    def problems(self):
        return floor_check.problems(self.pkg, ("__init__", "worker/main"))

    def test_a_sound_package_passes(self):
        self.assertEqual(self.problems(), [])

    def test_a_planted_upward_import_fails(self):
        self.write({"child/run": "def run():\n    from ..judge.verdict import fail  # lazy, still read\n"})
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("child/run.py:3 imports judge/verdict (lazily): a child module", found[0])

    def test_a_planted_circle_fails_and_is_printed(self):
        self.write({"common/wire": "import fakepkg.judge.verdict\n"})  # verdict -> wire -> verdict
        self.assertIn("import circle: common/wire -> judge/verdict -> common/wire", self.problems())

    def test_common_importing_a_floor_above_fails(self):
        self.write({"common/wire": "def send():\n    from ..child.run import run  # lazy, still read\n"})
        found = self.problems()
        self.assertTrue(any("common/wire.py:3 imports child/run (lazily): common/ is the ground floor" in p
                            for p in found), found)

    def test_a_child_importing_the_worker_fails(self):
        self.write({"child/run": "from fakepkg.worker.jobs import run\n"})
        found = self.problems()
        self.assertTrue(any("child/run.py:2 imports worker/jobs" in p and "a child module" in p
                            for p in found), found)
        self.assertTrue(any("only worker/ and the entry points" in p for p in found), found)

    def test_only_entry_points_import_the_worker(self):
        self.write({"judge/verdict": "from ..worker import jobs\n"})
        found = self.problems()
        self.assertTrue(any("judge/verdict.py:2 imports worker/jobs: only worker/" in p
                            for p in found), found)
        self.assertTrue(any("import circle: judge/verdict -> worker/jobs -> judge/verdict" in p
                            for p in found), found)

    def test_an_entry_point_imported_by_a_worker_module_fails(self):
        self.write({"worker/jobs": "def later():\n    from . import main\n"})
        found = self.problems()
        self.assertTrue(any("worker/jobs.py:3 imports worker/main (lazily): an entry point" in p
                            for p in found), found)

    def test_a_module_outside_the_floors_fails_with_its_name(self):
        self.write({"newcomer": "from .common import wire\n"})
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("outside the floors' folders", found[0])
        self.assertIn("newcomer.py", found[0])

    def test_a_folder_that_is_no_floor_fails(self):
        self.write({"extras/__init__": '"""FAKE."""\n', "extras/tool": "from ..common import wire\n"})
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("folders that are no floor", found[0])
        self.assertIn("extras/", found[0])

    def test_a_floor_without_its_init_fails(self):
        os.remove(os.path.join(self.pkg, "judge", "__init__.py"))
        self.assertIn("judge/ has no __init__.py (a one-line docstring of the floor's job)",
                      self.problems())

    def test_a_heavy_init_fails(self):
        self.write({"__init__": "from .common import wire\n"})
        self.assertTrue(any("must stay light" in p for p in self.problems()))
        self.write({"__init__": '"""FAKE package."""\n', "common/__init__": "from . import wire\n"})
        found = self.problems()
        self.assertTrue(any(p.startswith("common/__init__.py:2 imports common/wire")
                            and "must stay light" in p for p in found), found)

    def test_a_module_without_a_docstring_fails(self):
        self.write_bare("judge/verdict", "from ..common.wire import send\n")
        found = self.problems()
        self.assertEqual(len(found), 1, found)
        self.assertIn("modules without a docstring", found[0])
        self.assertIn("judge/verdict.py", found[0])


class ReadmeFilesTest(unittest.TestCase):
    """The README's "Files" lists the package's own files and each floor's folder once."""

    def test_every_folder_and_top_file_listed(self):
        with open(README, encoding="utf-8") as f:
            text = f.read()
        section = text.split("\n## Files\n", 1)[1].split("\n## ", 1)[0]
        listed = re.findall(r"^- `([\w.]+/?)`", section, re.M)
        modules = floor_check.modules_of(PACKAGE)
        want = sorted({floor_check.floor_of(m) + "/" for m in modules} - {"/"}) + \
            sorted(m + ".py" for m in modules if floor_check.floor_of(m) == "")
        have = [x for x in listed if x.endswith("/") or x.endswith(".py")]
        self.assertEqual(sorted(have), sorted(want),
                         "src/gpu/eval/README.md, Files: one line `- `folder/` its job` per floor "
                         "and `- `name.py` ...` per file beside them (tests/eval/test_floors.py)")


if __name__ == "__main__":
    unittest.main()
