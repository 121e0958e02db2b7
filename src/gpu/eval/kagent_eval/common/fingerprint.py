"""Fingerprints that let the agent spot duplicate candidates, and the confirmation reuse a
kernel's verdicts (docs/lua-api.md, `fingerprint` and `compiled_fingerprint`)."""
import ast
import hashlib
import re


def of_source(source):
    """Hash of the code's syntax tree: comments, blank lines and formatting do not count."""
    try:
        norm = ast.dump(ast.parse(source), annotate_fields=False, include_attributes=False)
    except SyntaxError:
        norm = "\n".join(line.rstrip() for line in source.splitlines() if line.strip())
    return hashlib.sha256(norm.encode()).hexdigest()[:16]


# PTX lines that say where the code came from, not what it does: the source file's path (a new
# temporary file in every candidate process, loader.load_module) and line numbers.
_PTX_SOURCE_LINE = re.compile(r"^\s*\.(file|loc)\b")
_PTX_DEBUG_SECTION = re.compile(r"^\s*\.section\s+\.debug")


def ptx_code(ptx):
    """The PTX without its debug information: `.file` and `.loc` lines and the `.debug_*`
    sections (which spell the source's path and folder out as bytes). What is left is the
    kernel's code, the same for the same kernel compiled in any process from any file."""
    kept, in_debug = [], False
    for line in ptx.splitlines():
        if in_debug:
            if line.strip().startswith("}"):
                in_debug = False
            continue
        if _PTX_DEBUG_SECTION.match(line):
            in_debug = "{" not in line or "}" not in line.split("{", 1)[1]
            continue
        if not _PTX_SOURCE_LINE.match(line):
            kept.append(line.rstrip())
    return "\n".join(kept)


def of_compiled(ptx_texts):
    """Hash of the compiled kernels' code (PTX texts, in any order), or None when there are none.
    A verdict on compiled code is kept under it (agents/search/confirm.lua), so it must not change
    with what a process names its files or in which order its kernels were compiled."""
    codes = sorted(hashlib.sha256(ptx_code(t).encode()).hexdigest() for t in ptx_texts)
    if not codes:
        return None
    return hashlib.sha256("\n".join(codes).encode()).hexdigest()[:16]


def compiled_ptx(module):
    """The PTX of the Triton kernels a loaded candidate module compiled, where Triton exposes it
    (its kernels' per-device caches)."""
    texts = []
    for value in list(vars(module).values()):
        caches = getattr(value, "device_caches", None) or {}
        if not caches and isinstance(getattr(value, "cache", None), dict):
            caches = value.cache
        try:
            for dev_cache in caches.values():
                table = dev_cache[0] if isinstance(dev_cache, tuple) else dev_cache
                for kernel in list(getattr(table, "values", lambda: [])()):
                    code = (getattr(kernel, "asm", {}) or {}).get("ptx")
                    if code:
                        texts.append(code if isinstance(code, str) else bytes(code).decode("utf-8", "replace"))
        except Exception:
            continue
    return texts


def of_module(module):
    """The compiled fingerprint of the kernels a candidate module has compiled so far."""
    return of_compiled(compiled_ptx(module))
