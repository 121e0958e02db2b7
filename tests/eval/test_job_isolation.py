"""Issue #53, what one job keeps from others and from the worker's parent, through real CPU-mode
workers: descriptors the worker's parent left open never reach a candidate (item 2); a job that
reaches its process limit is stopped at once (item 8); the candidate cache is content-addressed,
so a job sees what jobs of its own sources left there and nothing else (item 9)."""
import os
import re
import secrets
import tempfile
import time
import unittest

import hostile_cases
from worker_client import Worker, fixture_text

NOTE_WRITER = """
import os
# @TOKEN@: the same text is the same sources
cache = os.environ["XDG_CACHE_HOME"]
note = os.path.join(cache, "note.txt")
seen = open(note).read() if os.path.exists(note) else "nothing"
os.makedirs(cache, exist_ok=True)
with open(note, "w") as f:
    f.write("left by @TOKEN@")
raise RuntimeError("REPORT seen=%s" % seen)
"""

# another source: looks for the note in its own cache, every folder above it and the folder
# where the candidates' cache was shared before (@BASE@)
NOTE_SEEKER = """
import os
found, refused = [], []
start = os.environ["XDG_CACHE_HOME"]
places = [start, os.path.dirname(start), os.path.dirname(os.path.dirname(start)), "@BASE@"]
for place in places:
    try:
        for dirpath, _, files in os.walk(place, onerror=lambda e: refused.append(e.filename)):
            for name in files:
                try:
                    with open(os.path.join(dirpath, name), errors="replace") as f:
                        if "left " + "by @TOKEN@" in f.read():  # not this source's own text
                            found.append(os.path.join(dirpath, name))
                except OSError:
                    pass
    except OSError:
        refused.append(place)
raise RuntimeError("REPORT found=%s" % (found or "nothing"))
"""


def _report(result):
    m = re.search(r"REPORT (\S+)", result.get("error") or "")
    return m.group(1) if m else result.get("error")


class InheritedDescriptorsTest(unittest.TestCase):
    def test_a_candidate_cannot_use_descriptors_the_workers_parent_left_open(self):
        w = Worker("cpu")
        try:
            case = hostile_cases.InheritedDescriptors(os.getuid(), w.ready["sandbox"])
            result, reached = case.run(w)
        finally:
            w.close()
        self.assertEqual(reached, "", result)
        self.assertIn("REPORT read=refused wrote=refused", result["error"])


class ProcessLimitTest(unittest.TestCase):
    def test_a_fork_bomb_is_stopped_when_it_reaches_its_limit(self):
        with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
            w = Worker("cpu", log=log.name)
            try:
                case = hostile_cases.EndlessForkBomb(os.getuid(), w.ready["sandbox"])
                why = case.layer(w.ready["sandbox"])
                if why:
                    self.skipTest(why)
                source = fixture_text("adversarial", case.fixture, TOKEN=case.token)
                result = w.job("verify", "relu_problem.py", source,
                               timeouts={"load": case.STAGE_S})
                replied = time.time()
            finally:
                w.close()
            text = log.read()
        self.assertEqual(result["code"], "EPROCESSES", result)
        # when it met its limit: its own note of the first refused fork, or, where the worker
        # killed it before that note was out, its last note before (earlier: a stricter bound)
        at = re.findall(r"LIMIT_AT ([0-9.]+) " + case.token, text) or \
            re.findall(r"FORKED ([0-9.]+) " + case.token, text)[-1:]
        self.assertTrue(at, "the bomb never forked")
        # stopped within a moment of the limit (0.41 s on an idle 2-core machine), not at the
        # stage's 60 s timeout it ran to before; 3 s leaves a loaded CI machine room
        self.assertLess(replied - float(at[0]), 3.0, result)


class CandidateCacheTest(unittest.TestCase):
    def test_a_job_sees_only_what_jobs_of_its_own_sources_left_in_the_cache(self):
        for spare in ("1", "0"):  # a sandbox prepared ahead of its job, and one forked for it
            with self.subTest(KAGENT_EVAL_SPARE=spare):
                self.check_cache(Worker("cpu", env={"KAGENT_EVAL_SPARE": spare}))

    def check_cache(self, w):
        token = secrets.token_hex(8)
        try:
            base = os.path.join(w.ready["sandbox"]["root"], "cache", "candidate")
            writer = NOTE_WRITER.replace("@TOKEN@", token)
            seeker = NOTE_SEEKER.replace("@TOKEN@", token).replace("@BASE@", base)
            first = w.job("verify", "relu_problem.py", writer)
            other = w.job("verify", "relu_problem.py", seeker)
            again = w.job("verify", "relu_problem.py", writer)
        finally:
            w.close()
        self.assertEqual(_report(first), "seen=nothing", first)
        self.assertEqual(_report(other), "found=nothing", other)
        self.assertEqual(_report(again), "seen=left", again)  # the same sources: a hit


class CandidateCacheEntriesTest(unittest.TestCase):
    """candidate_cache.py in process, on a folder of the test's (no worker)."""

    def setUp(self):
        from unittest import mock
        from kagent_eval.sandbox import candidate_cache
        self.cc = candidate_cache
        self.tmp = tempfile.TemporaryDirectory(prefix="kagent-cache-test-")
        self.base = os.path.join(self.tmp.name, "cache")
        os.mkdir(self.base)
        patch = mock.patch.object(candidate_cache, "base", return_value=self.base)
        patch.start()
        self.addCleanup(patch.stop)
        self.addCleanup(self.tmp.cleanup)

    def job(self, spec):
        job_dir = tempfile.mkdtemp(dir=self.tmp.name)
        self.cc.lend(job_dir, spec)
        return job_dir, self.cc.folder_in(job_dir)

    def test_an_entry_goes_back_under_its_sources_and_to_them_only(self):
        a = {"problem": "p = 1\n", "candidate": "a = 1\n"}
        b = dict(a, candidate="b = 1\n")
        job_dir, cache = self.job(a)
        with open(os.path.join(cache, "note"), "w") as f:
            f.write("from a")
        self.cc.give_back(job_dir)
        self.assertFalse(os.path.exists(cache))
        _, cache_b = self.job(b)
        self.assertEqual(os.listdir(cache_b), [])
        _, cache_a = self.job(a)
        self.assertEqual(os.listdir(cache_a), ["note"])

    def test_a_link_left_in_place_of_the_cache_is_not_kept(self):
        spec = {"problem": "p = 1\n", "candidate": "c = 1\n"}
        job_dir, cache = self.job(spec)
        os.rmdir(cache)
        os.symlink(self.base, cache)
        self.cc.give_back(job_dir)
        self.assertFalse(os.path.lexists(os.path.join(self.base, self.cc.key(spec))))
        self.assertFalse(os.path.lexists(cache))

    def test_prune_removes_old_entries_the_least_recently_used_and_old_layouts(self):
        def entry(name, age_s, size):
            path = os.path.join(self.base, name)
            os.mkdir(path)
            with open(os.path.join(path, "f"), "wb") as f:
                f.write(b"x" * size)
            os.utime(path, (now - age_s, now - age_s))
            return path
        now = time.time()
        old = entry("a" * 64, self.cc.MAX_AGE_S + 60, 10)
        least = entry("b" * 64, 120, 64 << 10)
        recent = entry("c" * 64, 60, 64 << 10)
        shared = entry("triton", 0, 10)  # the one folder every candidate shared before
        self.cc.prune(now=now, max_bytes=100 << 10)
        self.assertEqual([os.path.exists(p) for p in (old, least, recent, shared)],
                         [False, False, True, False])


if __name__ == "__main__":
    unittest.main()
