"""The trials' comparisons, started as each trial's outputs arrive (worker side, trusted).

A candidate's process sends its regular trials before its warm-up and timed loop. The worker's
comparison of those outputs against the reference's is pure arithmetic on what arrived, so it
runs on a thread of the worker while the process goes on timing, instead of after its last
message, where it was most of the checks between the candidate's GPU work and the reply.

Nothing is decided here: verdict.check_trials takes each comparison's outcome from here where
one was started, computes it itself where not (a trial that came late, a process forked on
demand), and judges every trial as before. The outcome of a comparison does not depend on when
it ran.

On by default on a GPU worker only: there the process's timing runs on the GPU, so a comparison
beside it takes nothing from it. On a CPU worker the timed calls run on the same few cores as
the comparison would, so it waits for the process's end there, as before
(KAGENT_EVAL_EARLY_CHECKS=1 turns it on anyway, for tests; =0 turns it off everywhere).
"""
import os
from concurrent.futures import ThreadPoolExecutor

from . import verdict

# threads of the worker that compare trials while the candidate's process runs: two keep a
# job's few trials ahead of the process without taking the host's cores from other workers
THREADS = 2


def enabled(cuda):
    flag = os.environ.get("KAGENT_EVAL_EARLY_CHECKS", "")
    if flag in ("0", "1"):
        return flag == "1"
    return bool(cuda)


class EarlyTrials:
    """Comparisons of one job's regular trials, each started when its frame arrives (offer)."""

    def __init__(self, ref_trials, rtol, atol, sample_seed, kernelbench=None, nonfinite="report"):
        self.ref_trials, self.nonfinite = ref_trials, nonfinite
        self.one = verdict.trial_comparer(rtol, atol, sample_seed, kernelbench)
        self.pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="kagent-early")
        self.started = {}  # id(trial frame) -> (the frame, kept so its id stays its own; future)
        self.taken = 0  # outcomes check_trials took from here (the result's worker_s.early_trials)

    def offer(self, obj, arrays):
        """A frame from the candidate's process (sandbox.collect's on_message): a trial that
        verdict.check_trials will compare starts its comparison now."""
        if not isinstance(obj, dict) or obj.get("type") != "trial":
            return
        try:
            pair = verdict.trial_pair(obj, arrays, self.ref_trials, self.nonfinite)
        except Exception:
            # a frame the candidate forged out of shape: check_trials meets it after the process
            # has ended, as without early checks; raising here would stop reading a live process
            return
        if pair is not None:
            self.started[id(obj)] = (obj, self.pool.submit(self.one, pair))

    def outcome(self, obj):
        """The comparison started for this frame, once it is done; None where none was."""
        frame, future = self.started.get(id(obj), (None, None))
        if frame is not obj:
            return None
        self.taken += 1
        return future.result()

    def close(self):
        """Comparisons not yet begun are dropped (a job that failed before its trials were
        judged); the threads end once the running ones have."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.started = {}
