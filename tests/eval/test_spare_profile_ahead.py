"""A spare prepares the profile (its metric check and config image, warmup.host) only where the
job that started it profiled (jobs.Evaluator._refill_spare); a job that profiles prepares its own
set before its exclusive stages (candidate_timing.prepare_profile). Without a GPU: the spares are
FAKE recorders of what they were asked to prepare, and the profiler's preparation a FAKE too."""
import unittest
from unittest import mock

from kagent_eval.child import candidate_timing
from kagent_eval.profile import profiling
from kagent_eval.sandbox import sandbox
from kagent_eval.worker import jobs
from kagent_eval.worker.lease import Lease
from kagent_eval.profile.profiler_error import ProfilerError


class FakeSpare:
    """Records its preparation's arguments; its job ends at once."""
    made = []

    def __init__(self, prepare, target, prep_args=()):
        self.prep_args = prep_args
        FakeSpare.made.append(self)

    def run(self, spec, timeouts, on_stage=None, defer_exit=False, on_message=None):
        out = sandbox.Outcome()
        out.messages.append(({"type": "done"}, []))
        return out


def evaluator():
    ev = object.__new__(jobs.Evaluator)
    ev.cuda, ev.use_spare = True, True
    ev.device, ev.threads = "cuda:0", None
    ev.lease = Lease(False, lambda _: None, lambda: "")
    ev.spare = None
    return ev


def spec(profile):
    return {"timeouts": {}, "op": "evaluate" if profile else "benchmark", "bench": {},
            "profile": profile, "audit": True}


class SpareProfileAhead(unittest.TestCase):
    def setUp(self):
        FakeSpare.made = []
        patcher = mock.patch.object(jobs.spare_mod, "Spare", FakeSpare)
        patcher.start()
        self.addCleanup(patcher.stop)

    def prepares_profile(self, spare):
        device, threads, warm, profile = spare.prep_args
        self.assertEqual((device, warm), ("cuda:0", True))
        return profile

    def test_the_first_spare_prepares_the_profile(self):
        ev = evaluator()
        ev._refill_spare()
        self.assertTrue(self.prepares_profile(ev.spare))

    def test_the_next_spare_prepares_what_the_job_that_started_it_used(self):
        ev = evaluator()
        ev._refill_spare()
        ev.run_candidate(spec(None))  # a candidate timed, not profiled: what a search sends most
        self.assertFalse(self.prepares_profile(ev.spare))
        ev.run_candidate(spec({"metric_set": "sol"}))  # a kept kernel, profiled
        self.assertTrue(self.prepares_profile(ev.spare))
        self.assertEqual(len(FakeSpare.made), 3)


class JobPreparesItsProfile(unittest.TestCase):
    def test_the_jobs_own_set_is_prepared(self):
        with mock.patch.object(profiling, "prepare_set") as prepare:
            candidate_timing.prepare_profile("full")
        prepare.assert_called_once_with("full", 0)

    def test_a_gpu_that_another_process_profiles_leaves_it_to_the_profile_stage(self):
        busy = ProfilerError("EBUSY", "cuptiProfilerGetCounterAvailability: "
                             "CUPTI_ERROR_HARDWARE_BUSY (another process is profiling this GPU)")
        with mock.patch.object(profiling, "prepare_set", side_effect=busy) as prepare:
            candidate_timing.prepare_profile("sol")  # no exception: the job goes on
        prepare.assert_called_once()


if __name__ == "__main__":
    unittest.main()
