"""The shadow of a reference at a higher precision (reference child only: trusted code).

For bf16 and fp16 jobs the reference child also runs the problem's Model in fp32 on the same
inputs upcast, with the low-precision model's own weights upcast (exact), and sends the digest
of that output beside the reference's. The worker uses it only where a candidate fails a trial
and the low-precision reference itself fails the same check against its shadow: a trial that
is ill-conditioned at that dtype (shadow_judge.judge_by_shadow).

For fp32 jobs the shadow is fp64, on the trials of all-zero inputs (FP64_DISTS; also on the
scaled "large" and "huge" ones, whose outputs can leave fp32's range: shadow_range.py): there a
normalization divides the rounding noise of an exactly constant value by its epsilon, so the
fp32 reference's output is that noise while the true output is a constant, and a candidate that
computes the constant exactly failed for it. On a GPU where PyTorch lets fp32 convolutions or
matmuls run in TF32 (torch.backends.cudnn.allow_tf32 is on by default), on every trial too: the
reference is then itself off the fp32 result by about TF32's precision, far beyond fp32's 1e-4,
and any other algorithm or memory layout for the same convolution (TorchInductor's channels-last
one) differed from it by as much. The worker judges by an fp64 shadow only where the reference
is itself off it: beyond the elementwise tolerance, or by more than the magnitude check allows
(shadow_judge.judge_by_shadow).

The shadow model is built on first use, so it costs nothing where no trial asks for one, and a
shadow that would not fit in the memory left (FREE_SHARE) or that fails is skipped with a note; the trial is then judged as without one.
"""
from ..common import digest, loader

DTYPES = ("bf16", "fp16")  # shadowed in fp32 on every trial
# an fp32 job's trials shadowed in fp64: inputs.PROPERTIES' all-zero inputs, and the scaled
# inputs ("large" x8, "huge" x1e3) that can take an output past fp32's range, where the order of
# operations decides which element overflows (shadow_range.py)
FP64_DISTS = ("zeros", "large", "huge")
# a shadow is run only where its fp32 inputs and outputs (or, at build, weights) take at most
# this share of the free memory: the forward's own temporaries are not known ahead
FREE_SHARE = 0.5


class Shadow:
    def __init__(self, torch, problem, init_inputs, model, spec):
        self.torch, self.problem, self.init_inputs, self.spec = torch, problem, init_inputs, spec
        self.device = spec["device"]
        self.enabled = spec["dtype"] in DTYPES or spec["dtype"] == "fp32"
        self.dtype = torch.float64 if spec["dtype"] == "fp32" else torch.float32
        self.label = "fp64" if spec["dtype"] == "fp32" else "fp32"
        self.width = 8 if spec["dtype"] == "fp32" else 4  # bytes per element
        self.source = model  # the low-precision model, whose state the shadow copies at build
        # an fp32 reference on a GPU that may compute in TF32: every trial gets its fp64 shadow
        self.tf32 = spec["dtype"] == "fp32" and self.device.startswith("cuda") and tf32_allowed(torch)
        self.model = None
        self.note = None  # why no shadow model exists, once building it failed

    def start(self):
        """Builds the shadow model now, before the reference model has run: a model whose state
        changes as it runs (batch norm's running statistics) then changes alike in both."""
        if not self.enabled:
            return
        torch = self.torch
        try:
            need = sum(t.numel() * self.width for t in list(self.source.parameters()) +
                       list(self.source.buffers()))
            if not self._fits(need):
                self.note = "the %s weights (%d MB) would not fit beside the reference" % (
                    self.label, need >> 20)
                return
            model = loader.build_model(torch, self.problem.Model, self.init_inputs, self.spec["seed"],
                                       self.dtype, self.device)
            want, got = self.source.state_dict(), model.state_dict()
            if set(want) != set(got) or any(want[k].shape != got[k].shape for k in want):
                self.note = "the model's %s state differs in names or shapes" % self.label
                return
            with torch.no_grad():
                for key, value in got.items():
                    value.copy_(want[key])
            self.model = model
        except Exception as e:
            self.note = "building the %s model failed: %s: %s" % (self.label, type(e).__name__,
                                                                   str(e)[:200])
            self._free()

    def wants(self, dist):
        """Whether a trial of inputs `dist` gets a shadow."""
        return self.enabled and (self.label == "fp32" or self.tf32 or dist in FP64_DISTS)

    def digest(self, args, out_metas, sample_seed):
        """(shadow metas, arrays, None) for one trial's inputs, or (None, [], note)."""
        if not self.enabled:
            return None, [], None
        if self.model is None:
            return None, [], self.note or "no %s model" % self.label
        torch, label = self.torch, self.label
        need = sum(a.numel() * self.width for a in args if isinstance(a, torch.Tensor)) + sum(
            m["numel"] * self.width for m in out_metas if m.get("kind") == "tensor")
        if not self._fits(need):
            return None, [], "the %s inputs and outputs (%d MB) would not fit" % (label, need >> 20)
        up = out = None
        try:
            up = [loader.cast_value(torch, a, self.dtype, self.device) for a in args]
            with torch.no_grad(), _no_tf32(torch):
                out = self.model(*up)
            del up
            outs = digest.flatten_outputs(torch, out)
            if len(outs) != len(out_metas):
                return None, [], "the %s outputs differ in number" % label
            metas, arrays = [], []
            for value, ref in zip(outs, out_metas):
                # whole where the reference's output went whole (the shadow's has more bytes)
                if isinstance(value, torch.Tensor):
                    meta, arrs = digest.tensor_digest(torch, value, sample_seed,
                                                      force_full=bool(ref.get("full")))
                else:
                    meta, arrs = digest.value_digest(torch, value, sample_seed)
                metas.append(meta)
                arrays.extend(arrs)
        except Exception as e:
            return None, [], "the %s run failed: %s: %s" % (label, type(e).__name__, str(e)[:200])
        finally:
            up = out = outs = None
            self._free()
        if any(m.get("kind") != r.get("kind") or m.get("shape") != r.get("shape")
               for m, r in zip(metas, out_metas)):
            return None, [], "the %s outputs differ in kind or shape" % label
        return metas, arrays, None

    def close(self):
        self.model = None
        self._free()

    def _fits(self, need):
        return need <= FREE_SHARE * _free_bytes(self.torch, self.device)

    def _free(self):
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()


def _tf32_switches(torch):
    """The backends whose allow_tf32 lets fp32 matmuls and convolutions run in TF32."""
    return [b for b in (getattr(torch.backends, "cuda", None) and torch.backends.cuda.matmul,
                        getattr(torch.backends, "cudnn", None)) if b is not None]


def tf32_allowed(torch):
    """Whether this torch lets fp32 convolutions or matmuls run in TF32 (its defaults, or what the
    problem set)."""
    for b in _tf32_switches(torch):
        try:
            if b.allow_tf32:
                return True
        except Exception:
            pass
    return False


class _no_tf32:
    """Context: fp32 matmuls and convolutions in full fp32 on a GPU (torch lets cuDNN use TF32
    for fp32 convolutions by default), restored after."""

    def __init__(self, torch):
        self.backends = _tf32_switches(torch)
        self.saved = []

    def __enter__(self):
        # a torch that refuses the setting keeps its own: TF32 still holds bf16 and fp16
        # inputs exactly, so the shadow stays far more precise than the reference
        for b in self.backends:
            try:
                value = b.allow_tf32
                b.allow_tf32 = False
                self.saved.append((b, value))
            except Exception:
                pass
        return self

    def __exit__(self, *exc):
        for b, value in self.saved:
            b.allow_tf32 = value
        return False


def _free_bytes(torch, device):
    """Memory the shadow may take: the GPU's free memory plus what torch holds unused, or the
    host's available memory (within this process's address-space limit) in CPU mode."""
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info()
        return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    limits = [v for v in (avail, soft if soft != resource.RLIM_INFINITY else None) if v]
    return min(limits) if limits else 0
