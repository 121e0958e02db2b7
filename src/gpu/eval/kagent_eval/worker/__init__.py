"""The trusted orchestration: the worker's loop, jobs, gates, the lease; never runs candidate code."""
