"""python3 -m kagent_eval.worker: the name kagent.gpu starts (worker/main.py runs the worker)."""
import sys

from .main import main

sys.exit(main())
