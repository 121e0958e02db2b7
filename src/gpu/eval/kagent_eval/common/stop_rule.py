"""How many calls a timed loop makes (timing.Timer.timed_loop): a fixed count, or until the
median is known well enough (src/gpu/eval/README.md, "Timing: how many calls")."""
import bisect
import math

STOPS = ("ci", "time")
# The "ci" rule times at least this many calls where the budget allows them at the first call's
# speed (a kernel under 15 ms: every kernel the fixed second timed this often). Each timed call's
# output is checked (timed_inputs.py): a kernel that answers stale on one call in N is met at
# least twice while N <= 32, as it was by the fixed second of calls.
CHECKED_CALLS = 64
# two-sided 95% normal quantile: the median's interval between order statistics (median_ci)
CI_Z = 1.96


def median_ci(sorted_vals, z=CI_Z):
    """(low, high): a distribution-free confidence interval of the median, between the order
    statistics at ranks n/2 -+ z*sqrt(n)/2 (the binomial count of values below the median,
    approximated as normal). Needs no assumption about the shape of the timings."""
    n = len(sorted_vals)
    half = z * math.sqrt(n) / 2.0
    lo = max(0, int(math.floor(n / 2.0 - half)))
    hi = min(n - 1, int(math.ceil(n / 2.0 + half)))
    return sorted_vals[lo], sorted_vals[hi]


def ci_rel(sorted_vals):
    """Half-width of median_ci relative to the median (inf where it cannot be had)."""
    if len(sorted_vals) < 2:
        return math.inf
    lo, hi = median_ci(sorted_vals)
    n = len(sorted_vals)  # the median of a sorted list, in constant time (checked every call)
    med = sorted_vals[n // 2] if n % 2 else (sorted_vals[n // 2 - 1] + sorted_vals[n // 2]) / 2.0
    if med <= 0:
        return 0.0 if hi == lo else math.inf
    return (hi - lo) / 2.0 / med


class StopRule:
    """When a timed loop stops. Fixed (reps given, or "time": the count min_time of calls take
    at the first call's speed): after that many calls. "ci": once at least min_reps calls (and
    CHECKED_CALLS where the budget fits them) are in and the median's interval (median_ci) lies
    within +-ci of it, or the loop has run budget seconds, or max_reps calls. Tight timings stop
    after a few dozen calls; noisy ones run to the budget, so the spread rule sees as many calls
    as before."""

    def __init__(self, min_reps, max_reps, reps=None, ci=None, budget_s=None):
        self.min_reps, self.max_reps = max(1, int(min_reps)), max(1, int(max_reps))
        self.reps = int(reps) if reps else None
        self.ci, self.budget_s = ci, budget_s
        # the calls a feed may count on (a rotation's moves fall inside them)
        self.plan = self.reps or min(self.min_reps, self.max_reps)
        self.sorted = []
        self.by = None

    @classmethod
    def for_options(cls, o, first_ms):
        if o["reps"]:
            return cls(o["min_reps"], o["max_reps"], reps=o["reps"])
        if o["stop"] == "time":
            est = max(first_ms, 1e-3)
            reps = int(min(o["max_reps"], max(o["min_reps"], math.ceil(o["min_time"] * 1e3 / est))))
            return cls(o["min_reps"], o["max_reps"], reps=reps)
        if o["stop"] != "ci":
            raise ValueError("bench.stop must be one of %s" % ", ".join(STOPS))
        fit = math.ceil(float(o["budget"]) * 1e3 / max(first_ms, 1e-3))
        floor = max(o["min_reps"], min(CHECKED_CALLS, fit))
        return cls(floor, o["max_reps"], ci=float(o["ci"]), budget_s=float(o["budget"]))

    def add(self, ms, elapsed_s):
        """Takes one call's time; True when the loop stops after it."""
        bisect.insort(self.sorted, ms)
        n = len(self.sorted)
        if self.reps:
            self.by = "reps" if n >= self.reps else None
        elif n < self.min_reps:
            self.by = None
        elif n >= self.max_reps:
            self.by = "max_reps"
        elif ci_rel(self.sorted) <= self.ci:
            self.by = "ci"
        elif elapsed_s >= self.budget_s:
            self.by = "budget"
        return self.by is not None

    def report(self):
        width = ci_rel(self.sorted)
        return {"rule": "ci" if self.reps is None else "reps", "by": self.by,
                "calls": len(self.sorted), "ci_rel": None if math.isinf(width) else width,
                "ci_target": self.ci, "budget_s": self.budget_s}
