"""A hint at why a candidate's outputs are off the reference's by a small error (worker process):
the error patterns a reduced precision leaves, named where the problem and the error make one
evident. A hint only: it never changes a verdict (src/gpu/eval/README.md, "Correctness").

What each pattern rests on: a matmul or convolution whose operands are rounded to a shorter
mantissa (TF32 and fp16 keep 10 bits, unit roundoff 2^-11 ~ 4.9e-4; bf16 keeps 7, 2^-8 ~ 3.9e-3)
leaves, over outputs whose sums cancel, a relative L2 error of about the unit roundoff; a
reduction accumulated in another order, or in the low-precision dtype itself, leaves a few
of the dtype's rounding steps.
"""
import re

# relative L2 error bands (upper bounds) of each precision's rounding in a matmul/convolution
TF32_MAX_REL_L2 = 1.5e-3
BF16_MAX_REL_L2 = 1.5e-2
UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
# a rounding error is spread over the output: its largest element is a few times its RMS (about 3
# for TF32 in a matmul), where one wrong element of n is sqrt(n) times it
MAX_ERR_PEAK = 10.0
ROUNDING_STEPS = 4  # how many of the dtype's rounding steps an accumulation-order error stays within

# a matrix product or convolution in the problem's source: the operations TF32 applies to
_MATMUL_OR_CONV = re.compile(
    r"\b(matmul|mm|bmm|addmm|baddbmm|addbmm|einsum|tensordot|linear|Linear|Bilinear|"
    r"conv\w*|Conv\w*)\b|[\w)\]]\s*@\s*[\w(]")


def has_matmul_or_conv(source):
    return bool(_MATMUL_OR_CONV.search(source or ""))


def read_source(path):
    """The problem's source (a trusted file), or "" where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def of(dtype, rel_l2_err, err_peak, matmul_or_conv):
    """A sentence naming the likely cause of a small value error, or None where none is
    evident: no error figure, an error too large for any rounding, or one concentrated on a few
    elements (err_peak, the largest error over the errors' RMS, above MAX_ERR_PEAK): a bug,
    not a precision."""
    if not rel_l2_err or rel_l2_err <= 0 or err_peak is None or err_peak > MAX_ERR_PEAK:
        return None
    if dtype == "fp32":
        if matmul_or_conv and rel_l2_err <= TF32_MAX_REL_L2:
            return ("TF32 (or fp16) in a matmul/convolution of an fp32 problem: a relative L2 "
                    "error of %.2g is what operands rounded to a 10-bit mantissa leave "
                    "(torch.backends.cuda.matmul.allow_tf32, tl.dot's default input_precision)"
                    % rel_l2_err)
        if rel_l2_err <= BF16_MAX_REL_L2:
            where = "in a matmul/convolution" if matmul_or_conv else "in an intermediate"
            return ("a lower precision %s of an fp32 problem (bf16 or fp16): a relative L2 "
                    "error of %.2g is what a 7- to 10-bit mantissa leaves" % (where, rel_l2_err))
        return None
    u = UNIT_ROUNDOFF.get(dtype)
    if u and rel_l2_err <= ROUNDING_STEPS * u:
        return ("accumulation order: a relative L2 error of %.2g, a few %s rounding steps, is what "
                "a reduction summed in another order or accumulated in %s leaves" % (
                    rel_l2_err, dtype, dtype))
    return None
