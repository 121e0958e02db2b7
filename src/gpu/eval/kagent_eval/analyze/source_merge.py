"""Joins several kernel sources into one module (the `merge` kind of the `analyze` op).

Each part keeps its text; only its module-level names change: every name the part binds at
module level (functions, classes, constants), and every reference that resolves to one of them,
gets the part's prefix, so two parts may both define `ModelNew` or `_kernel`. Scopes are followed
as Python resolves names (a parameter or local of the same name is left alone), and edits are
made at the names' positions, so comments and layout survive. Imports are not renamed: plain
top-level imports are hoisted and written once, and two parts binding one name to different
modules is an error. Parse only: nothing here runs the sources.
"""
import ast

ENTRY_POINTS = ("ModelNew", "kernel_function")


class MergeError(Exception):
    pass


def merge(parts):
    """parts: [{prefix, source, label}] -> {ok, source, entries: [{kind, name}], imports} or
    {ok: False, error}."""
    try:
        return _merge(parts)
    except MergeError as e:
        return {"ok": False, "error": "EMERGE: %s" % e}


def _merge(parts):
    bound = {}          # import-bound name -> (module it names, part label)
    hoisted, future = [], []
    seen_imports = set()
    bodies, entries = [], []
    for part in parts:
        label, prefix, source = part["label"], part["prefix"], part["source"]
        try:
            tree = ast.parse(source)
        except SyntaxError as e:
            raise MergeError("part %s does not parse: %s at line %s" % (label, e.msg, e.lineno))
        defined, imported = module_bindings(tree)
        for name, target in imported.items():
            if name in bound and bound[name][0] != target and "*" not in (target, bound[name][0]):
                raise MergeError("parts %s and %s import different things as `%s` (%s, %s)" % (
                    bound[name][1], label, name, bound[name][0], target))
            bound.setdefault(name, (target, label))
        renames = {n: prefix + n for n in defined if n not in imported} if prefix else {}
        lines = source.encode().split(b"\n")
        edits = _Renamer(renames).edits(tree, lines)
        drop = set()
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and _alone_on_lines(stmt, tree.body):
                text = ast.get_source_segment(source, stmt)
                key = ast.dump(stmt)
                if key not in seen_imports:
                    seen_imports.add(key)
                    is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
                    (future if is_future else hoisted).append(text)
                drop.update(range(stmt.lineno - 1, stmt.end_lineno))
        body = _apply(lines, edits, drop).decode()
        bodies.append((label, prefix, body.strip("\n")))
        kind = next((k for k in ENTRY_POINTS if k in defined), None)
        if kind is None:
            raise MergeError("part %s defines neither ModelNew nor kernel_function" % label)
        entries.append({"kind": kind, "name": renames.get(kind, kind)})
    out = future + hoisted + [""]
    for label, prefix, body in bodies:
        out.append("")
        out.append("# ---- part %s%s ----" % (label, " (module-level names prefixed %s)" % prefix if prefix else ""))
        out.append(body)
    return {"ok": True, "source": "\n".join(out).rstrip("\n") + "\n", "entries": entries,
            "imports": {k: v[0] for k, v in bound.items()}}


def module_bindings(tree):
    """(names bound at module level other than by imports, {import-bound name: module})."""
    defined, imported = set(), {}
    for stmt in _module_statements(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(stmt.name)
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    imported[a.asname] = a.name
                else:
                    imported[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                mod = "." * stmt.level + (stmt.module or "")
                imported[a.asname or a.name] = "*" if a.name == "*" else mod + "." + a.name
        else:
            for node in _own_nodes(stmt):
                # an except handler's name is left alone: it lives only in its handler
                if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    defined.add(node.id)
    return defined, imported


def _module_statements(stmts):
    """Statements that run in the scope of `stmts`, through if/try/for/while/with blocks (not
    into nested functions or classes); except handlers are yielded too."""
    for s in stmts:
        yield s
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if isinstance(inner, list):
                yield from _module_statements(inner)
        for h in getattr(s, "handlers", None) or []:
            yield h
            yield from _module_statements(h.body)


def _own_nodes(stmt):
    """Nodes of a statement that are in its own scope (not inside nested defs, classes,
    lambdas or comprehensions), compound bodies excluded (they are statements of their own)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "finalbody", "handlers") and node is stmt:
                continue
            for child in (value if isinstance(value, list) else [value]):
                if isinstance(child, ast.AST) and not isinstance(child, _SCOPES):
                    stack.append(child)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _alone_on_lines(stmt, body):
    """True when no other module-level statement shares the lines of stmt (`import a; x = 1`)."""
    for other in body:
        if other is not stmt and other.lineno <= stmt.end_lineno and other.end_lineno >= stmt.lineno:
            return False
    return True


class _Renamer:
    """Positions of the names to rename, following Python's scoping: a name inside a function
    refers to the module only when no enclosing function binds it (class bodies do not enclose
    their methods) or when it is declared global."""

    def __init__(self, renames):
        self.renames = renames
        self.out = []

    def edits(self, tree, lines):
        self.lines = lines
        if self.renames:
            self._block(tree.body, [])
        return self.out

    # scopes: list of (kind, locals, globals)
    def _resolves_to_module(self, name, scopes):
        for i in range(len(scopes) - 1, -1, -1):
            kind, local, glob = scopes[i]
            if name in glob:
                return True
            if kind == "class" and i != len(scopes) - 1:
                continue
            if name in local:
                return False
        return True

    def _rename_name(self, node, scopes):
        if node.id in self.renames and self._resolves_to_module(node.id, scopes):
            self._edit(node.lineno, node.col_offset, node.end_col_offset, node.id)

    def _edit(self, lineno, start, end, name):
        # positions come from the parser; one that does not hold the name (an f-string on an
        # older Python) fails the merge rather than leave a dangling reference
        if self.lines[lineno - 1][start:end] != name.encode():
            raise MergeError("cannot place `%s` at line %d column %d" % (name, lineno, start))
        self.out.append((lineno, start, end, self.renames[name]))

    def _block(self, stmts, scopes):
        for s in stmts:
            self._visit(s, scopes)

    def _visit(self, node, scopes):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                self._visit(d, scopes)
            self._visit_args_outer(node.args, scopes)
            if node.returns is not None:
                self._visit(node.returns, scopes)
            self._def_name(node, scopes)
            inner = scopes + [("function",) + _function_locals(node)]
            self._block(node.body, inner)
            return
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
                self._visit(d, scopes)
            self._def_name(node, scopes)
            inner = scopes + [("class",) + _block_locals(node.body)]
            self._block(node.body, inner)
            return
        if isinstance(node, ast.Lambda):
            self._visit_args_outer(node.args, scopes)
            local = set(_arg_names(node.args))
            self._visit(node.body, scopes + [("function", local, set())])
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            local = set()
            for gen in node.generators:
                local.update(n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name))
            inner = scopes + [("function", local, set())]
            for gen in node.generators:
                self._visit(gen, inner)
            for field in ("elt", "key", "value"):
                if getattr(node, field, None) is not None:
                    self._visit(getattr(node, field), inner)
            return
        if isinstance(node, ast.Name):
            self._rename_name(node, scopes)
            return
        if isinstance(node, ast.Global):
            for name in node.names:
                if name in self.renames:
                    self._word_on_lines(node, name)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child, scopes)

    def _visit_args_outer(self, args, scopes):
        """Defaults and annotations are evaluated where the function is defined."""
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            self._visit(d, scopes)
        for a in _all_args(args):
            if a.annotation is not None:
                self._visit(a.annotation, scopes)

    def _def_name(self, node, scopes):
        if node.name in self.renames and not scopes:
            line = self.lines[node.lineno - 1]
            keyword = b"class" if isinstance(node, ast.ClassDef) else b"def"
            start = line.find(keyword, node.col_offset)
            pos = line.find(node.name.encode(), start + len(keyword))
            if start < 0 or pos < 0:
                raise MergeError("cannot find the name of `%s` at line %d" % (node.name, node.lineno))
            self._edit(node.lineno, pos, pos + len(node.name.encode()), node.name)

    def _word_on_lines(self, node, name):
        import re
        line = self.lines[node.lineno - 1]
        for m in re.finditer(rb"\b%s\b" % re.escape(name.encode()), line):
            if m.start() >= node.col_offset:
                self._edit(node.lineno, m.start(), m.end(), name)


def _all_args(args):
    out = list(getattr(args, "posonlyargs", [])) + list(args.args) + list(args.kwonlyargs)
    out += [a for a in (args.vararg, args.kwarg) if a is not None]
    return out


def _arg_names(args):
    return [a.arg for a in _all_args(args)]


def _function_locals(fn):
    local, glob = _block_locals(fn.body)
    local.update(_arg_names(fn.args))
    return local - glob, glob


def _block_locals(stmts):
    """(names a function or class body binds, names it declares global)."""
    local, glob = set(), set()
    for s in _module_statements(stmts):
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(s.name)
            continue
        if isinstance(s, ast.Global):
            glob.update(s.names)
        elif isinstance(s, ast.Nonlocal):
            local.update(s.names)
        elif isinstance(s, ast.Import):
            local.update(a.asname or a.name.split(".")[0] for a in s.names)
        elif isinstance(s, ast.ImportFrom):
            local.update(a.asname or a.name for a in s.names)
        for node in _own_nodes(s):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                local.add(node.id)
            elif isinstance(node, ast.NamedExpr):
                local.add(node.target.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                local.add(node.name)
    return local, glob


def _apply(lines, edits, drop):
    """The source with each (line, start, end, new) edit made (byte columns) and the lines in
    drop (0-based) removed."""
    by_line = {}
    for line, start, end, new in edits:
        by_line.setdefault(line - 1, []).append((start, end, new.encode()))
    out = []
    for i, text in enumerate(lines):
        if i in drop:
            continue
        for start, end, new in sorted(by_line.get(i, []), reverse=True):
            text = text[:start] + new + text[end:]
        out.append(text)
    return b"\n".join(out)
