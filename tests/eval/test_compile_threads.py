"""TorchInductor compiles in the candidate's own thread (child_candidate.one_compile_thread), in
CPU mode: a worker told to give Inductor four compile threads, and a candidate that, as a FAKE of
Inductor's compile pool, starts a worker thread at import when it may use more than one."""
import os
import sys
import types
import unittest
from unittest import mock

from worker_client import ROOT, Worker

sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.child import child_candidate  # noqa: E402

POOL_LIKE = '''# FAKE of TorchInductor's compile pool: its compile threads read as Inductor reads them, and a
# worker thread started at import where there may be more than one
import os
import threading
import torch
import torch.nn as nn

THREADS = @THREADS@
if THREADS > 1:
    _stop = threading.Event()
    threading.Thread(target=_stop.wait, daemon=True).start()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp(x, min=0.0)
'''
FROM_ENV = 'int(os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "1"))'


class CandidateProcess(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.w = Worker("cpu", env={"TORCHINDUCTOR_COMPILE_THREADS": "4"})

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def test_inductor_in_a_candidate_starts_no_compile_workers(self):
        r = self.w.job("verify", "relu_problem.py", POOL_LIKE.replace("@THREADS@", FROM_ENV))
        self.assertTrue(r["ok"], r)
        self.assertNotIn("threads_started", r["flags"])

    def test_a_thread_the_candidate_starts_is_still_flagged(self):
        # the check above can fail: the same thread, started whatever the setting, is seen
        r = self.w.job("verify", "relu_problem.py", POOL_LIKE.replace("@THREADS@", "4"))
        self.assertIn("threads_started", r["flags"], r)


class ConfigAlreadyRead(unittest.TestCase):
    def test_a_config_imported_before_is_set_too(self):
        config = types.ModuleType("torch._inductor.config")
        config.compile_threads = 8
        with mock.patch.dict(sys.modules, {"torch._inductor.config": config}), \
                mock.patch.dict(os.environ, {"TORCHINDUCTOR_COMPILE_THREADS": "8"}):
            child_candidate.one_compile_thread()
            self.assertEqual(config.compile_threads, 1)
            self.assertEqual(os.environ["TORCHINDUCTOR_COMPILE_THREADS"], "1")


if __name__ == "__main__":
    unittest.main()
