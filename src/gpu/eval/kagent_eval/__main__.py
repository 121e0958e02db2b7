"""python3 -m kagent_eval check ...: the evaluator's command line (kagent_eval/worker/oneshot.py)."""
import sys

from .worker.oneshot import main

sys.exit(main())
