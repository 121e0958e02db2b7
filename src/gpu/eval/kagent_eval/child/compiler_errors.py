"""A failed compile's log cut to what a model can act on: each error's file:line, its message and
the source line it points at (the result's error text, and so the repair prompt).

A `load_inline` build that fails raises with ninja's whole log: the compiler's command lines
(each a few hundred characters of flags), `FAILED:` lines and, from g++, every candidate overload
and every header on the include path of each error: 70 lines for three errors, 200 for a
template. What is kept, in order:
  - g++/clang: `file:line:col: error: message`, its source line and caret (`  6 |  ...`), and
    the `In function` line before it;
  - nvcc's front end: `file(line): error: message` and the source line and caret after it;
  - ptxas and nvlink: `ptxas error   : message`, `nvlink error   : message`;
  - the linker: `undefined reference to ...`.
Notes, candidates, include chains, warnings and command lines are dropped. Where no line is
recognised, the log's last lines that are not command lines are kept, so nothing becomes
silent. `main.cpp` is the job's `cpp_sources` after one `#include <torch/extension.h>` line
that load_inline puts first; `cuda.cu`, its `cuda_sources` likewise.
"""
import os
import re

MAX_ERRORS = 8
MAX_CHARS = 3000
FALLBACK_LINES = 15

_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? "
                  r"(?P<kind>fatal error|error): (?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>\S+)\((?P<line>\d+)\): (?P<kind>catastrophic error|error): "
                   r"(?P<msg>.*)$")
_TOOL = re.compile(r"^(?P<tool>ptxas|nvlink|ptxas fatal|nvlink fatal)\s*(?:error|fatal)?\s*: "
                   r"(?P<msg>.*)$")
_LINK = re.compile(r"undefined reference to|undefined symbol")
_IN_FUNCTION = re.compile(r"^[^\s:][^:]*: In (?:member )?function ")
_GCC_SOURCE = re.compile(r"^\s*\d*\s+\|")  # g++'s quoted source line and its caret line
_COMMAND = re.compile(r"^(\[\d+/\d+\] |FAILED: |ninja: |Error building extension|\S*(c\+\+|g\+\+|"
                      r"gcc|clang\+\+|nvcc) )")


def _short(path):
    """A build folder's file by its own name: the folder is the job's, its path means nothing to
    the author of the sources."""
    return os.path.basename(path) if os.path.isabs(path) else path


def cut(log):
    """The compile log `log` cut to its errors (text). Never longer than MAX_CHARS."""
    lines = str(log).splitlines()
    kept, errors, i = [], 0, 0
    context = None
    while i < len(lines):
        line = lines[i].rstrip()
        m = _GCC.match(line)
        if _IN_FUNCTION.match(line):
            context = line
        elif m:
            errors += 1
            if errors <= MAX_ERRORS:
                if context:
                    kept.append(_short_prefix(context))
                    context = None
                where = ":".join(x for x in (_short(m["file"]), m["line"], m["col"]) if x)
                kept.append("%s: %s: %s" % (where, m["kind"], m["msg"]))
                while i + 1 < len(lines) and _GCC_SOURCE.match(lines[i + 1]) and len(kept) < 200:
                    i += 1
                    kept.append(lines[i].rstrip())
        elif _NVCC.match(line):
            m = _NVCC.match(line)
            errors += 1
            if errors <= MAX_ERRORS:
                kept.append("%s(%s): %s: %s" % (_short(m["file"]), m["line"], m["kind"], m["msg"]))
                # the source line and the caret under it, indented, before a blank line
                for _ in range(2):
                    if i + 1 < len(lines) and lines[i + 1].strip() and \
                            lines[i + 1].startswith(" "):
                        i += 1
                        kept.append(lines[i].rstrip())
        elif _TOOL.match(line) or (_LINK.search(line) and not _COMMAND.match(line)):
            errors += 1
            if errors <= MAX_ERRORS:
                kept.append(line.strip())
        i += 1
    if not errors:
        rest = [x.rstrip() for x in lines if x.strip() and not _COMMAND.match(x)]
        text = "\n".join(rest[-FALLBACK_LINES:])
        return _bound("compile failed (no error line recognised; the log's last lines):\n" + text)
    more = "\n(%d more errors not shown)" % (errors - MAX_ERRORS) if errors > MAX_ERRORS else ""
    head = "compile failed, %d error%s:\n" % (errors, "" if errors == 1 else "s")
    return _bound(head + "\n".join(kept) + more)


def _short_prefix(line):
    path, _, rest = line.partition(": ")
    return "%s: %s" % (_short(path), rest)


def _bound(text):
    if len(text) <= MAX_CHARS:
        return text
    return text[:MAX_CHARS - 30].rstrip() + "\n... (cut at %d characters)" % MAX_CHARS
