"""python3 -m kagent_eval check ...: the evaluator's command line (kagent_eval/oneshot.py)."""
import sys

from .oneshot import main

sys.exit(main())
