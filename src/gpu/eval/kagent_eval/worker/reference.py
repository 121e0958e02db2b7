"""The reference side of a job, in the worker: runs the trusted reference child and caches what
it measured per problem (trial outputs, baseline timings, the roofline's inputs).

The roofline is computed here, from the reference's figures (compulsory bytes of its inputs,
outputs and parameters; its FLOP count; the GPU's peaks), so nothing a candidate's process
reports goes into the speed-of-light bound. The peaks are a measurement: they are taken once per
worker (or device, device_share.py) in a child of their own (peaks.py) under the lease exclusive, and handed to the
reference child; measured beside other workers' trials they would come out low, and every
honest kernel near the bound would look faster than it. Workers sharing a device take both from
its first worker that measured them (device_share.py).
"""
import collections
import hashlib
import json
import os

from ..child import child_reference, unleased_compile
from ..judge import trust, verdict
from ..profile import roofline
from ..sandbox import sandbox
from .lease import SHARED

ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
            "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}


class ReferenceCache:
    def __init__(self, lease, cuda, share=None):
        self.cuda = cuda
        # the device's other workers' results (device_share.py), or None: this worker's own
        self.share = share
        self._peaks = None  # the device's measured peaks, once taken
        # the GPU's lease: shared while the reference computes its outputs, exclusive when the
        # child also times the baselines (one process does both; the outputs are computed once
        # per problem)
        self.lease = lease
        self.trials = collections.OrderedDict()
        self.baselines = {}
        self.roof = {}  # problem key -> {flops, param_bytes, peaks}
        self.last_s = 0.0
        self.last_stage_s = {}  # the last reference child's stages: seconds each

    @staticmethod
    def problem_key(spec):
        st = os.stat(spec["problem"])
        with open(spec["problem"], "rb") as f:  # what another worker's entry was made from
            content = hashlib.sha256(f.read()).hexdigest()[:32]
        return (spec["problem"], st.st_mtime_ns, st.st_size, content, spec["dtype"], spec["seed"])

    def get(self, spec):
        """(trials {index: trial}, baselines or None, error or None)."""
        pkey = self.problem_key(spec)
        rkey = pkey + (spec["trials"], spec["properties"], spec["generalize"], spec["replay_seed"],
                       json.dumps(spec.get("extra_trials"), sort_keys=True))
        bench = spec["bench"]
        bkey = pkey + (json.dumps(bench, sort_keys=True),) if bench is not None else None
        trials = self.trials.get(rkey)
        base = self.baselines.get(bkey) if bkey else None
        want_outputs = trials is None
        want_base = bench is not None and base is None and bench.get("baselines")
        self.last_s, self.last_stage_s = 0.0, {}
        if (want_outputs or want_base) and self.share is not None:
            # one reference per device: the first worker runs it, the others wait and read
            names = (self.share.entry("trials", rkey + (spec["sample_seed"],)),
                     self.share.entry("base", bkey) if bkey else None)
            with self.share.locked(self.share.entry("problem", pkey)):
                got = [self.share.load(n) if n and w else None
                       for n, w in zip(names, (want_outputs, want_base))]
                if got[0] is not None:
                    self._keep_outputs(pkey, rkey, got[0])
                if got[1] is not None:
                    base = self._keep_base(bkey, got[1])
                out, err = self._run_reference(spec, pkey, rkey, bkey, got[0] is None and want_outputs,
                                               got[1] is None and want_base)
                if err:
                    return None, None, err
                if out is not None:
                    if got[0] is None and want_outputs:
                        self.share.store(names[0], out.of_type("trial") + out.of_type("flops"))
                    if got[1] is None and want_base:
                        self.share.store(names[1], out.of_type("baselines"))
                        base = self.baselines[bkey]
            return self.trials.get(rkey), base, None
        out, err = self._run_reference(spec, pkey, rkey, bkey, want_outputs, want_base)
        if err:
            return None, None, err
        if want_base:
            base = self.baselines[bkey]
        return self.trials.get(rkey), base, None

    def _keep_outputs(self, pkey, rkey, out):
        f, _ = out.first("flops")
        if f is not None:
            self.roof[pkey] = {"flops": f.get("value"), "param_bytes": f.get("param_bytes"),
                               "peaks": f.get("peaks"), "memory": f.get("memory")}
        self.trials[rkey] = verdict.reference_trials(out)
        while len(self.trials) > 2:
            self.trials.popitem(last=False)

    def _keep_base(self, bkey, out):
        b, _ = out.first("baselines")
        self.baselines[bkey] = (b or {}).get("result")
        return self.baselines[bkey]

    def _run_reference(self, spec, pkey, rkey, bkey, want_outputs, want_base):
        """Runs the reference child for what is wanted and keeps it: (outcome or None when
        nothing was wanted, error text or None)."""
        if not (want_outputs or want_base):
            return None, None
        bench = spec["bench"]
        rspec = dict(spec, want_outputs=want_outputs,
                     baselines=list(bench["baselines"]) if want_base else None)
        if want_outputs and self.cuda:
            rspec["peaks"] = self.device_peaks()
        # the child holds the lease shared until its baselines, which it times behind a gate
        # under the lease exclusive; their torch.compile compiles with the lease given up
        # (unleased_compile.py)
        with self.lease.held(SHARED):
            out = sandbox.run_child(child_reference.run, (rspec,), spec["timeouts"],
                                    gate=unleased_compile.follow(self.lease))
        # out of GPU memory: the job fails with result.out_of_memory, and the pool runs it again
        # alone on the GPU where it shared it (kagent/gpu/admission.lua)
        self.last_s, self.last_stage_s = out.elapsed, out.stage_durations()
        err = out.failure or None
        e, _ = out.first("error")
        if err or e:
            msg = err[1].replace("the candidate's process", "the reference's process") if err \
                else "%s: %s" % (e.get("error_type"), e.get("message"))
            return None, "the reference failed in stage %s: %s" % (out.stage, msg)
        if want_outputs:
            self._keep_outputs(pkey, rkey, out)
        if want_base:
            self._keep_base(bkey, out)
        return out, None

    def control(self, spec):
        """(timing summary, None) or (None, why): the reference's eager forward timed now, in a
        fresh trusted child under the lease exclusive, as the control beside a noisy figure
        (noise.py). Never cached: it says what the device is like at this moment."""
        from . import noise
        rspec = dict(spec, want_outputs=False, baselines=[noise.CONTROL_NAME],
                     fake_noisy_clock=noise.fake_noisy_window())
        with self.lease.held(SHARED):
            out = sandbox.run_child(child_reference.run, (rspec,), spec["timeouts"],
                                    gate=unleased_compile.follow(self.lease))
        b, _ = out.first("baselines")
        res = (b or {}).get("result") or {}
        timing = res.get(noise.CONTROL_NAME)
        if isinstance(timing, dict) and timing.get("median"):
            return timing, None
        e, _ = out.first("error")
        return None, (res.get(noise.CONTROL_NAME + "_error") or (out.failure or (None, None))[1]
                      or (e or {}).get("message") or "no timing came back")

    def device_peaks(self):
        """The GPU's peaks ({"dram_bytes_per_s", ...} or {"error": ...}), measured on first use in
        a child of their own under the lease exclusive and kept for the worker's life."""
        if self._peaks is None:
            res = self.share.peaks(self._measure_peaks) if self.share is not None \
                else self._measure_peaks()
            if "error" in res:
                return res
            self._peaks = res
        return self._peaks

    def _measure_peaks(self):
        from ..profile import peaks
        with self.lease.timed():
            out = sandbox.run_child(peaks.run, ({"device": "cuda:0" if self.cuda else "cpu"},),
                                    {"run": 120})
        res, _ = out.first("peaks")
        if res is None or not isinstance(res.get("result"), dict):
            why = out.failure or (out.first("error")[0] or {}).get("message")
            return {"error": "EROOFLINE: the peaks could not be measured: %s" % (why,)}
        return res["result"]

    def peaks(self, spec):
        return (self.roof.get(self.problem_key(spec)) or {}).get("peaks")

    def memory(self, spec, trial0):
        """The problem's GPU memory as its reference found it (result.memory): the reference's
        peak over its trials, and trial 0's inputs and outputs; None in CPU mode."""
        info = (self.roof.get(self.problem_key(spec)) or {}).get("memory")
        if not self.cuda or not info:
            return None
        return {"reference_peak_bytes": info.get("peak_bytes"),
                "inputs_bytes": _bytes(trial0.get("inputs")),
                "outputs_bytes": _bytes(trial0.get("outputs"))}

    def roofline(self, spec, trial0, median_ms):
        """The speed-of-light figures for a median, or None where the reference gave none."""
        info = self.roof.get(self.problem_key(spec))
        peaks = (info or {}).get("peaks") or {}
        if spec.get("sol_ms"):
            lower = float(spec["sol_ms"])
            return {"lower_bound_ms": lower, "sol_pct": lower / median_ms * 100.0 if median_ms
                    else None, "source": "job"}
        if not info or not peaks.get("dram_bytes_per_s"):
            return None
        nbytes = _bytes(trial0.get("inputs")) + _bytes(trial0.get("outputs")) + \
            int(info.get("param_bytes") or 0)
        out = roofline.roofline(nbytes, info.get("flops"), peaks, median_ms, dtype=spec["dtype"])
        out["sol_limit_pct"] = trust.sol_limit_pct(peaks)
        return out


def _bytes(metas):
    return sum(int(m.get("numel") or 0) * ITEMSIZE.get(m.get("dtype"), 4)
               for m in metas or [] if m.get("kind") == "tensor")
