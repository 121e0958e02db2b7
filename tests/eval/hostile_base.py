"""The hostile cases' base (tests/eval/hostile_cases.py lists the cases): a Case prepares what it
attacks, runs its candidate (tests/fixtures/adversarial/cpu_*) through a real worker and says
what it reached: "" for nothing, else a short description. Also the helpers the cases share: the
candidate's report line and the reason a sandbox layer is missing.
"""
import re
import secrets

from worker_client import fixture_text

MEMORY_MB = 1024  # the CPU workers' memory limit (KAGENT_EVAL_MEMORY_MB); the hogs take twice
                  # the limit of the worker they run in


def candidate_report(result):
    """The candidate's "REPORT ..." line (in its error), or None."""
    m = re.search(r"REPORT ([^\n\"']*)", result.get("error") or "")
    return m.group(1).strip() if m else None


class Case:
    name = ""
    fixture = ""
    root_only = False  # meaningful only when the worker runs as root

    def __init__(self, uid, status):
        self.uid = uid  # the worker's user
        self.status = status  # the worker's sandbox status
        self.token = secrets.token_hex(8)

    def values(self):
        return {"TOKEN": self.token}

    @staticmethod
    def layer(status):
        """None when the worker (its ready line's `sandbox`) has the layer that stops this case,
        else why not (what the worker reports missing)."""
        return None

    def reached(self, result):
        raise NotImplementedError

    def cleanup(self):
        pass

    def limit_mb(self):
        return self.status.get("memory_mb") or MEMORY_MB

    def run(self, worker, problem="relu_problem.py"):
        """(result, reached). problem: a fixture of tests/fixtures/eval (a GPU one on a GPU)."""
        try:
            result = worker.job("verify", problem,
                                fixture_text("adversarial", self.fixture, **self.values()))
            return result, self.reached(result)
        finally:
            self.cleanup()


def missing_layer(status, key, good, what):
    """Why the layer `key` is missing here, or None to run the case: where the worker's status
    has no such key (an evaluator from before the layer), the case runs and shows what it reaches."""
    if key not in status or status[key] in good:
        return None
    return "%s: %s=%r here (%s)" % (what, key, status.get(key), "; ".join(status["missing"]) or "?")
