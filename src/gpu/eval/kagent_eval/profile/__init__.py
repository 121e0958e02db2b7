"""Profiles, peaks and rooflines, compute-sanitizer, the Python profile of a job."""
