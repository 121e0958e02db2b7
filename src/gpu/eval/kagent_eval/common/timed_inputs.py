"""What the timed calls run on, and a sample of what each of them returned (child side).

A timed loop that feeds one input set on every call cannot tell a right output from a stale
one: a kernel that skips its work on some calls and hands back its previous output is right
whenever the inputs repeat, and a median does not see the skipped calls. So timed calls rotate
through several input sets whose reference outputs are known (the regular trials' own inputs),
and after every call, outside its timed events, a few hundred output elements at secret
positions are gathered into a buffer. The worker compares each call's sample with its set's
reference (timed_verdict.check_timed_outputs). Twice during the loop the sets' contents move one
slot along, so a result cached by an input's address goes stale too.

Sets: ``Rotation`` (the benchmark, the baselines and the interleaved comparison) and ``Fresh``
(the hardened re-measure: new values before every call, whose outputs nobody knows; there a
call must differ from the call before it, and the last call, on trial 0's inputs, is checked
whole).
"""
import numpy as np

from . import digest, gpu_memory, inputs

SETS = 3
# elements sampled per tensor output after every timed call: enough that a stale output (all of
# it another set's) cannot hide, few enough that a thousand calls travel in a few MB
CALL_SAMPLE = 512
# at these fractions of the timed calls the sets' contents move one slot along (an address-keyed
# cache then returns another set's output); each move copies every set once, untimed
ROTATE_AT = (1.0 / 3.0, 2.0 / 3.0)
# input sets may take this share of the device's free memory (the rest is the kernel's)
SET_MEMORY_SHARE = 0.4
_SUB_SEED = 0x5EED


def set_trials(plan, count=SETS):
    """Trial indices whose inputs the timed calls rotate through: regular trials, the problem's
    own distribution first (what the baselines and a user time), then the others in order."""
    regular = [e for e in plan if e["kind"] == "regular"]
    ordered = [e for e in regular if e["dist"] == "own"] + \
              [e for e in regular if e["dist"] != "own"]
    return [e["trial"] for e in ordered[:count]]


def call_positions(numel, full, sample_seed, count=CALL_SAMPLE):
    """(indices into a digest's data, flat positions in the tensor) of the per-call sample of
    a tensor output with that many elements, travelling whole (full) or sampled. Child and
    worker derive the same positions; they lie among the digest's, so the reference's value at
    each one is known. One seeded pick in each of `count` equal strata of the digest: sorted and
    distinct by construction, in O(count) (a draw without replacement shuffled the whole
    million-element digest: 12 ms, for every output of every set the worker checks)."""
    positions = None if full else digest.sample_positions(numel, sample_seed)
    data_len = numel if full else len(positions)
    k = min(count, data_len)
    if k == data_len:
        sub = np.arange(data_len, dtype=np.int64)
    else:
        rng = np.random.RandomState((sample_seed ^ _SUB_SEED) % (2 ** 32))
        bounds = (np.arange(k + 1, dtype=np.float64) * (data_len / k)).astype(np.int64)
        sub = bounds[:-1] + (rng.random_sample(k) * np.diff(bounds)).astype(np.int64)
    flat = sub if full else positions[sub]
    return sub, flat


def nbytes_of(torch, args):
    """The bytes of the tensors among args."""
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def fits(torch, device, nbytes, count, share=SET_MEMORY_SHARE):
    """Whether `count` input sets of `nbytes` take at most `share` of the GPU memory this
    process may still take: the GPU's free memory, within the job's budget where the pool gave
    one (gpu_memory.free_bytes). Always on the CPU."""
    if not device.startswith("cuda"):
        return True
    return nbytes * count <= share * gpu_memory.free_bytes(torch)


class Sampler:
    """Gathers CALL_SAMPLE elements of every tensor output of a call into one float64 row."""

    def __init__(self, torch, sample_seed):
        self.torch, self.seed = torch, sample_seed
        self.layout = None  # per output: {index, numel, full, offset, count}
        self.positions, self.rows = [], []

    def _prepare(self, outs):
        torch = self.torch
        self.layout, self.positions, offset = [], [], 0
        for j, o in enumerate(outs):
            if not isinstance(o, torch.Tensor) or o.is_complex() or o.numel() == 0:
                continue
            full = o.numel() * o.element_size() <= digest.FULL_LIMIT_BYTES
            _, flat = call_positions(o.numel(), full, self.seed)
            self.positions.append(torch.from_numpy(flat).to(o.device))
            self.layout.append({"index": j, "numel": o.numel(), "full": full, "offset": offset,
                                "count": len(flat)})
            offset += len(flat)

    def take(self, out):
        """Samples one call's output (runs on the harness's stream, outside the events)."""
        torch = self.torch
        outs = digest.flatten_outputs(torch, out)
        if self.layout is None:
            self._prepare(outs)
        parts = []
        for entry, pos in zip(self.layout, self.positions):
            o = outs[entry["index"]] if entry["index"] < len(outs) else None
            if not isinstance(o, torch.Tensor) or o.numel() != entry["numel"]:
                # another shape or kind than the first call's: a row of NaN marks it
                parts.append(torch.full((entry["count"],), float("nan"), dtype=torch.float64,
                                        device=pos.device))
                continue
            parts.append(torch.take(o.detach(), pos).to(torch.float64))
        self.rows.append(torch.cat(parts) if parts else None)

    def report(self):
        """(report dict, wire arrays): the layout and every call's row."""
        rows = [r for r in self.rows if r is not None]
        if not rows or len(rows) != len(self.rows):
            return {"layout": self.layout or [], "rows": 0}, []
        mat = self.torch.stack(rows).cpu().numpy()
        return ({"layout": self.layout, "rows": len(self.rows)},
                [("float64", [int(mat.size)], mat.reshape(-1))])


class Rotation:
    """Input sets made from the given trials; call i runs on slot i % n. rotate: move the sets'
    contents one slot along at ROTATE_AT (needs one set's memory more while it happens)."""

    def __init__(self, torch, problem, spec, dtype, device, trials, rotate=True):
        self.torch = torch
        self.trials, self.slots = [], []
        for t in trials:
            # the trial's own inputs, bit for bit (the same contract: inputs.py)
            args, _ = inputs.make_inputs(torch, problem, spec["seed"] + t, t, dtype, device,
                                         inputs.distribution(t), None, spec.get("input_contract"))
            if self.slots and not fits(torch, device, nbytes_of(torch, args),
                                        len(self.slots) + 1 + (1 if rotate else 0)):
                del args
                break
            self.trials.append(t)
            self.slots.append(args)
        self.content = list(range(len(self.slots)))  # slot s holds set content[s]
        self.rotate = rotate and len(self.slots) > 1
        self.calls = []  # the set (index into trials) each timed call ran on
        self.current = self.slots[0]

    def before(self, i, reps):
        if self.rotate and i > 0 and any(i == int(f * reps) for f in ROTATE_AT):
            self._move_along()
        slot = i % len(self.slots)
        self.current = self.slots[slot]
        self.calls.append(self.content[slot])

    def _move_along(self):
        """Every slot takes the next slot's contents, in place (the addresses stay)."""
        torch = self.torch
        first = [a.clone() if isinstance(a, torch.Tensor) else a for a in self.slots[0]]
        for s in range(len(self.slots)):
            src = first if s == len(self.slots) - 1 else self.slots[s + 1]
            for dst, val in zip(self.slots[s], src):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(val)
        del first
        self.content = self.content[1:] + self.content[:1]

    def report(self):
        return {"kind": "rotation", "sets": self.trials, "calls": self.calls}


class Fresh:
    """New input values (the problem's own distribution, never seen by the candidate) before
    every call, one set alive at a time; the last call runs on trial 0's inputs."""

    def __init__(self, torch, problem, spec, dtype, device):
        self.torch, self.problem, self.spec = torch, problem, spec
        self.dtype, self.device = dtype, device
        self.current = None
        self.calls = []
        self._make(spec["seed"] + 7907, 0)

    def _make(self, seed, trial):
        self.current = None  # free the last set before making the next
        self.current, _ = inputs.make_inputs(self.torch, self.problem, seed, trial, self.dtype,
                                             self.device, "own")

    def before(self, i, reps):
        last = i == reps - 1
        self._make(self.spec["seed"] if last else self.spec["seed"] + 7919 + i, 0)
        self.calls.append(0 if last else None)  # None: values nobody knows the output of

    def report(self):
        return {"kind": "fresh", "sets": [0], "calls": self.calls}
