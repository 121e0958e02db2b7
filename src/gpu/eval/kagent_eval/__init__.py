"""kagent_eval: the evaluator worker of kagent-rt (verification, benchmarking, audit).

Run as ``python3 -m kagent_eval.worker --device N|UUID|cpu`` with ``PYTHONPATH=<root>/src/gpu/eval``
(or after ``pip install src/gpu/eval``).
The package imports torch lazily where it can, so the trusted parent stays light.
"""

import os as _os

PROTOCOL_VERSION = 1
# The project's one version (CMake reads the same file); the pool refuses a worker of another.
with open(_os.path.join(_os.path.dirname(__file__), "VERSION"), encoding="ascii") as _f:
    __version__ = _f.read().strip()


def check(problem, kernel, **kw):
    """Verifies and times one candidate the way kagent-rt's pool does (kagent_eval/worker/oneshot.py):
    check("problem.py", "kernel.py", dtype="fp32", device=None) -> the worker's result dict."""
    from .worker.oneshot import check as _check
    return _check(problem, kernel, **kw)
