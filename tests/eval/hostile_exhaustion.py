"""Hostile cases that exhaust a resource: processes (fork bombs, many children) and memory the
job's limit must count (/dev/shm, shared anonymous mmap). Each is stopped at its limit."""
import os
import re
import time

from hostile_base import Case, candidate_report, missing_layer
from worker_client import fixture_text

FORK_DEPTH = 8    # the fork bomb's tree: 511 shells, each with a sleep, at once
CHILDREN = 300


def _process_limit(status):
    return missing_layer(status, "process_limit", ("cgroup", "rlimit", "watch"), "no process limit")


class ForkBomb(Case):
    name = "fork bomb (%d shells)" % (2 ** (FORK_DEPTH + 1) - 1)
    fixture = "cpu_fork_bomb.py"
    layer = staticmethod(_process_limit)

    def values(self):
        return dict(super().values(), DEPTH=FORK_DEPTH)

    def reached(self, result):
        """Under RLIMIT_NPROC (no pids cgroup) the shells swallow their refused forks, so the
        job may end without EPROCESSES: what counts is that the tree stayed within the limit."""
        if result.get("code") == "EPROCESSES":
            return ""
        m = re.search(r"processes=(\d+)", candidate_report(result) or "")
        if m and self.status.get("max_processes") and int(m.group(1)) < self.status["max_processes"]:
            return ""
        return "%s, job %s" % (candidate_report(result) or "ran", result.get("code") or "ok")


class ManyChildren(Case):
    name = "%d child processes" % CHILDREN
    fixture = "cpu_many_children.py"
    layer = staticmethod(_process_limit)

    def values(self):
        # past the limit wherever it is (4 per core on a machine of more than 64 cores)
        # a worker that counts the job's tasks (process_limit "watch": root without a pids
        # cgroup) stops a job that holds more than its limit for longer than its count's period;
        # one that stays past it for less is held by the namespace's pid_max alone
        hold = 0.5 if self.status.get("process_limit") == "watch" else 0
        return dict(super().values(), HOLD_S=hold,
                    CHILDREN=max(CHILDREN, (self.status.get("max_processes") or 0) + 50))

    def reached(self, result):
        if result.get("code") == "EPROCESSES":
            return ""
        return "%s, job %s" % (candidate_report(result) or "ran", result.get("code") or "ok")


class ShmHog(Case):
    name = "/dev/shm hog (twice the memory limit)"
    fixture = "cpu_shm_hog.py"

    @staticmethod
    def layer(status):
        if status.get("shm") == "swept":  # the machine's /dev/shm: the memory cgroup counts it
            return missing_layer(status, "memory_counts", ("all (cgroup)",), "/dev/shm not counted")
        return missing_layer(status, "shm", ("private",), "no private /dev/shm")

    def values(self):
        return dict(super().values(), MB=2 * self.limit_mb())

    def path(self):
        return "/dev/shm/kagent-shm-%s" % self.token

    def reached(self, result):
        found = []
        if os.path.exists(self.path()):
            found.append("%d MB left in /dev/shm after the job" % (os.path.getsize(self.path()) >> 20))
        m = re.search(r"wrote=(\d+)", candidate_report(result) or "")
        if m and int(m.group(1)) > self.limit_mb():
            found.append("wrote %s MB past a %d MB limit" % (m.group(1), self.limit_mb()))
        if not m and result.get("code") != "EMEMORY":
            found.append("job %s: %s" % (result.get("code") or "ok", (result.get("error") or "")[:200]))
        return "; ".join(found)

    def cleanup(self):
        try:
            os.unlink(self.path())
        except FileNotFoundError:
            pass


class SharedMmapHog(Case):
    name = "shared anonymous mmap (twice the limit)"
    fixture = "cpu_shared_mmap_hog.py"

    @staticmethod
    def layer(status):
        return missing_layer(status, "memory_counts", ("all (cgroup)",),
                             "shared memory not counted")

    def values(self):
        return dict(super().values(), MB=2 * self.limit_mb())

    def reached(self, result):
        if result.get("code") == "EMEMORY":
            return ""
        return "held %d MB past a %d MB limit, job %s" % (2 * self.limit_mb(), self.limit_mb(),
                                                          result.get("code") or "ok")


def _stopped_at_limit(status):
    """Where the worker sees a job reach its limit: a pids cgroup's counter, or the tasks of the
    job's PID namespace (not RLIMIT_NPROC over its user's tasks, without one)."""
    namespaced = str(status.get("processes")).startswith("namespace")
    if status.get("process_limit") == "rlimit" and not namespaced:
        return "no watch on the process limit: RLIMIT_NPROC without namespaces here (%s)" % (
            "; ".join(status.get("missing") or []) or "?")
    return missing_layer(status, "process_limit", ("cgroup", "watch", "rlimit"), "no process limit")


class EndlessForkBomb(Case):
    """A fork bomb that never stops on its own: stopped at its limit, not at the stage timeout."""
    name = "endless fork bomb (stopped at its limit)"
    fixture = "cpu_fork_bomb_unbounded.py"
    layer = staticmethod(_stopped_at_limit)
    STAGE_S = 60

    def run(self, worker, problem="relu_problem.py"):
        t0 = time.monotonic()
        source = fixture_text("adversarial", self.fixture, **self.values())
        result = worker.job("verify", problem, source, timeouts={"load": self.STAGE_S})
        self.took = time.monotonic() - t0
        return result, self.reached(result)

    def reached(self, result):
        if result.get("code") == "EPROCESSES" and self.took < self.STAGE_S / 2:
            return ""
        return "ran %.0f s (stage timeout %d s), job %s" % (self.took, self.STAGE_S,
                                                          result.get("code") or "ok")
