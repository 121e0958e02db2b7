"""The machine's noise told from the kernel's (src/gpu/eval/README.md, "Fail closed"). A hardened
re-measure whose only objections are ones a busy machine raises too (trust.NOISE_FLAGS: a wide
spread, disagreeing with the first, a clock the host's load left unchecked) is taken once more at
once; a second such re-measure is followed, on the same device, by a control: the problem's reference (eager) timed again in a fresh trusted
child (reference.ReferenceCache.control). Its figure is held to the rules the kernel's was:

- the control noisy too (its own p90/p10 beyond the limit, or disagreeing with its own earlier
  figure), or the host's CPUs oversubscribed while it ran (host_load.py): the machine was noisy. The worker waits (BACKOFF_S) and measures both again; still
  noisy after the last wait, the job is "not measured" (ENOISY): neither accepted nor a refusal
  of the kernel, with no figure on it;
- the control steady: the noise is the kernel's. KERNEL_STRIKES noisy re-measures (the first,
  taken again without a control, counts: a burst that hit only the kernel's window seldom comes
  twice) and the job is refused, EUNTRUSTED, naming both spreads.

Only a hardened re-measure with no flag at all is ever accepted (remeasure.confirm_figures): a
control can turn a refusal into "not measured", never into an accepted figure. The control runs
in a process the candidate never ran in, after the candidate's processes are gone.
"""
import os
import time

from ..judge import trust

# The waits (seconds) before measuring again while the machine stays noisy: one more round after
# each, so at most len(BACKOFF_S) + 1 rounds of noise before ENOISY. Bursts seen on shared hosts
# (another process's kernels, a compile beside the job) last seconds.
BACKOFF_S = (2.0, 4.0, 8.0)
# How many hardened re-measures the kernel must fail, with a steady control after each, before
# the noise is called the kernel's
KERNEL_STRIKES = 2
CONTROL_NAME = "eager"

# TEST ONLY: a FAKE noisy clock. KAGENT_EVAL_FAKE_NOISY_CLOCK=N (or "always") in the worker's
# environment makes the clock of its next N timed windows (each job's timed loop, each hardened
# re-measure, each control) read every third call 25 times too long: noise that hits the kernel
# and the control alike, as a busy machine does (timing.fake_noisy_clock). Never set in use.
FAKE_CLOCK_ENV = "KAGENT_EVAL_FAKE_NOISY_CLOCK"
_fake_windows_left = None  # None: no fake clock; an int, or "always"


def _read_fake_env():
    global _fake_windows_left
    value = os.environ.get(FAKE_CLOCK_ENV, "").strip()
    if value == "always":
        _fake_windows_left = "always"
    elif value.isdigit():
        _fake_windows_left = int(value)


_read_fake_env()


def fake_noisy_window():
    """Whether the next timed window gets the fake noisy clock (and counts it)."""
    global _fake_windows_left
    if _fake_windows_left == "always":
        return True
    if isinstance(_fake_windows_left, int) and _fake_windows_left > 0:
        _fake_windows_left -= 1
        return True
    return False


def sleep(seconds):
    time.sleep(seconds)  # a seam: the unit tests count the waits instead of taking them


def control_noisy(control, earlier, max_spread, cuda, host_loaded=False):
    """True where the control's own figure fails the rules the kernel's did: its p90/p10 beyond
    the limit, or disagreeing with its earlier figure (the job's baseline, or the last control);
    or where the host's CPUs were oversubscribed while it ran (host_loaded, host_load.py). A short
    control can come out steady on a host whose every core is taken while a kernel of many
    calls or threads does not; the candidate's processes are gone by then, so that load is the
    machine's, never the kernel's doing."""
    if host_loaded:
        return True
    if trust.figure_flags(control, None, None, False, max_spread_or(max_spread, cuda)):
        return True
    return bool(earlier) and not trust.agree(earlier, control, cuda)


def max_spread_or(max_spread, cuda):
    return max_spread if max_spread is not None else trust.MAX_SPREAD["cuda" if cuda else "cpu"]


def control_text(controls, steady):
    """The controls' p90/p10 (and medians' drift), as a refusal or ENOISY names them."""
    ratios = ", ".join("%.3g" % c["spread"] for c in controls
                       if isinstance((c or {}).get("spread"), (int, float)))
    return "the control (the reference's %s forward, timed after each re-measure): p90/p10 %s, %s" % (
        CONTROL_NAME, ratios or "?", "steady" if steady else "as noisy")


def not_measured(result, flags, kernel_detail, controls, cuda):
    """Ends the job "not measured" (ENOISY, stage timing, no figure): the machine stayed noisy."""
    result["trust"] = dict(result.get("trust") or {}, not_measured=sorted(set(flags)))
    return trust.fail_without_figures(
        result, "timing", "ENOISY",
        "not measured: the %s was too noisy (%d rounds, %g s of waits): %s (%s); %s. Nothing is "
        "said of the kernel: measure it again later"
        % ("GPU" if cuda else "machine", len(BACKOFF_S) + 1, sum(BACKOFF_S),
           trust.untrusted_reason(flags), kernel_detail or "no spread", control_text(controls, False)))
