"""Hostile candidates against the sandbox, each with what it would reach if the sandbox let it
(tests/fixtures/adversarial/cpu_*): one list for the test (test_cpu_hostile.py, which asserts
that each reaches nothing) and for the bench (bench/hostile.py, which prints a table).

A case prepares what it attacks (a listening socket, a victim process), runs its candidate
through a real worker and says what it reached: "" for nothing, else a short description. The
base is hostile_base.py's, the cases hostile_exhaustion.py's (processes, memory) and
hostile_escape.py's (sockets, signals, files, descriptors); this module keeps their one list.
"""
import shutil

import hostile_base
from hostile_escape import (AbstractUnixSocket, InheritedDescriptors, ReadShadow,
                            SignalOtherProcess, SshAgent, SshAgentInHome, TmuxServer,
                            TmuxServerInHome, UnixSocketByPath, WriteOutside)
from hostile_exhaustion import EndlessForkBomb, ForkBomb, ManyChildren, SharedMmapHog, ShmHog

MEMORY_MB = hostile_base.MEMORY_MB  # the CPU workers' memory limit the tests and bench set

CASES = [ForkBomb, ManyChildren, ShmHog, SharedMmapHog, UnixSocketByPath, TmuxServer,
         TmuxServerInHome, SshAgent, SshAgentInHome, AbstractUnixSocket, SignalOtherProcess,
         ReadShadow, WriteOutside, InheritedDescriptors, EndlessForkBomb]


def applicable(case, uid):
    return not (case.root_only and uid != 0) and not unavailable(case)


def unavailable(case):
    """The tools a case needs that this machine lacks (scripts/setup.sh --tests installs them),
    or None."""
    lacking = [t for t in getattr(case, "tools", ()) if not shutil.which(t)]
    return "needs %s" % ", ".join(lacking) if lacking else None
