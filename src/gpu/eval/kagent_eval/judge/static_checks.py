"""Static checks on candidate source (AST only; the source is never executed here).

Findings have a severity: "reject" fails the job (patching the harness, subclassing the
reference, try/except falling back), "flag" is reported (streams, threads, torch compute ops in
the wrapper: on a GPU the kernel audit decides whether they carry the time).
"""
import ast

# modules whose attributes a candidate must not reassign (timers, sync, profiler, harness)
_GUARDED_ROOTS = {"torch", "time", "triton", "numpy", "np", "F", "nn", "builtins", "sys",
                  "gc", "kagent_eval", "ctypes", "threading"}
_BANNED_CALLS = {"setattr", "delattr", "__import__"}
_PATCH_NAMES = {"perf_counter", "time", "monotonic", "synchronize", "elapsed_time", "Event",
                "record", "do_bench", "profile", "profiler", "allclose", "isclose", "equal"}
_TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "einsum", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool2d",
    "avg_pool3d", "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "group_norm",
    "linear", "sum", "mean", "var", "std", "norm", "prod", "cumsum", "relu", "gelu", "silu",
    "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "pow", "max", "min", "amax", "amin",
    "argmax", "topk", "sort", "scaled_dot_product_attention", "tensordot", "dot", "mv",
    "baddbmm", "cross_entropy", "interpolate", "pad", "unfold", "cdist", "where", "clamp",
}
_STREAM_THREAD = {"Stream", "Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "Process",
                  "start_new_thread", "stream", "Pool"}


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, lines, reference_names):
        self.lines = lines
        self.refs = reference_names
        self.findings = []
        self.in_wrapper = 0

    def add(self, rule, node, severity):
        line = getattr(node, "lineno", 0)
        text = self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""
        self.findings.append({"rule": rule, "line": line, "text": text, "severity": severity})

    def visit_ClassDef(self, node):
        for base in node.bases:
            name = _dotted(base) or ""
            if name.split(".")[-1] in self.refs:
                self.add("subclass_reference", node, "reject")
        wrapper = node.name == "ModelNew"
        self.in_wrapper += wrapper
        self.generic_visit(node)
        self.in_wrapper -= wrapper

    def visit_FunctionDef(self, node):
        wrapper = node.name == "kernel_function"
        self.in_wrapper += wrapper
        self.generic_visit(node)
        self.in_wrapper -= wrapper

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node):
        for handler in node.handlers:
            body = ast.Module(body=handler.body, type_ignores=[])
            calls = [_dotted(n.func) or "" for n in ast.walk(body) if isinstance(n, ast.Call)]
            names = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)}
            if any(c.split(".")[0] in ("torch", "F") or c.split(".")[-1] in self.refs
                   for c in calls) or names & self.refs:
                self.add("try_except_fallback", handler, "reject")
            else:
                self.add("try_except", handler, "flag")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def _check_target(self, target, node):
        name = _dotted(target) if isinstance(target, ast.Attribute) else None
        root = name.split(".")[0] if name else None
        if name and (root in _GUARDED_ROOTS or (root != "self" and target.attr in _PATCH_NAMES)):
            self.add("patches_harness", node, "reject")
        if isinstance(target, ast.Subscript) and _dotted(target.value) in ("sys.modules", "builtins.__dict__"):
            self.add("patches_harness", node, "reject")

    def visit_Assign(self, node):
        for t in node.targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Attribute, ast.Subscript)):
                    self._check_target(sub, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _dotted(node.func) or ""
        last = name.split(".")[-1]
        if name in _BANNED_CALLS:
            if name != "__import__" and node.args and (_dotted(node.args[0]) or "").split(".")[0] in _GUARDED_ROOTS:
                self.add("patches_harness", node, "reject")
        if last in _STREAM_THREAD and ("cuda" in name or "thread" in name.lower()
                                       or "futures" in name or "multiprocessing" in name
                                       or name in ("Thread", "Stream", "ThreadPoolExecutor")):
            self.add("streams_threads", node, "flag")
        if name in ("gc.get_objects", "gc.get_referrers", "inspect.currentframe", "sys._getframe"):
            self.add("introspection", node, "reject")
        if self.in_wrapper:
            root = name.split(".")[0]
            if (root in ("torch", "F") and last in _TORCH_COMPUTE) or (
                    isinstance(node.func, ast.Attribute) and not root in ("tl", "triton")
                    and last in _TORCH_COMPUTE and root not in ("math", "np", "numpy", "self")):
                self.add("torch_compute_in_wrapper", node, "flag")
            if last in self.refs or (isinstance(node.func, ast.Attribute) and last in (
                    "conv", "conv1", "pool", "norm") and root == "self"):
                self.add("calls_reference", node, "flag")
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if self.in_wrapper and isinstance(node.op, ast.MatMult):
            self.add("torch_compute_in_wrapper", node, "flag")
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name.split(".")[0] in ("threading", "concurrent", "multiprocessing",
                                             "subprocess", "builtins"):
                self.add("streams_threads" if alias.name != "builtins" else "patches_harness",
                         node, "flag" if alias.name != "builtins" else "reject")
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        mod = (node.module or "").split(".")[0]
        if mod in ("threading", "concurrent", "multiprocessing", "subprocess"):
            self.add("streams_threads", node, "flag")
        if mod == "kagent_eval":
            self.add("patches_harness", node, "reject")
        self.generic_visit(node)


def scan(source, reference_names=("Model",)):
    """List of findings {rule, line, text, severity}; a syntax error is one finding."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [{"rule": "syntax_error", "line": e.lineno or 0, "text": str(e.msg), "severity": "reject"}]
    scanner = _Scanner(source.splitlines(), set(reference_names))
    scanner.visit(tree)
    seen, out = set(), []
    for f in scanner.findings:
        key = (f["rule"], f["line"])
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def rejecting(findings, cpu_mode):
    """Findings that fail the job. In CPU mode candidates are PyTorch, so compute ops and
    reference calls are expected there."""
    return [f for f in findings if f["severity"] == "reject"]
