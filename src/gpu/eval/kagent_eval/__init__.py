"""kagent_eval: the evaluator worker of kagent-rt (verification, benchmarking, audit).

Run as ``python3 -m kagent_eval.worker --device N|cpu`` with ``PYTHONPATH=<root>/src/gpu/eval``.
The package imports torch lazily where it can, so the trusted parent stays light.
"""

PROTOCOL_VERSION = 1
