"""The verdicts, judged in the worker from the children's data (numpy; never imports torch)."""
