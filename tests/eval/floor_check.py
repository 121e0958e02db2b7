"""The evaluator's floor plan, checked (test_floors.py): every import between the modules of a
package in folders, read from their source with ast (module level and lazy, inside functions). A
module's floor is its folder (worker/jobs.py is on floor worker): the folder is the one statement
of where a module belongs, and the rules below say which floor may import which.

The checker takes the package's folder, so test_floors.py runs it on kagent_eval and on small
FAKE packages made in a temp folder, whose planted faults it must find."""
import ast
import os

# The floors, in the order they are printed. A folder of the package that is not one of them has
# no rules yet and fails until it is given its place here (and in test_floors.py's docstring).
FLOOR_NAMES = ("worker", "judge", "child", "sandbox", "profile", "analyze", "common")
# the only modules beside the floors' folders: the package itself and `python -m package`
TOP = ("__init__", "__main__")


def modules_of(package_dir):
    """The package's modules, each by its path under the package without ".py": "__init__",
    "worker/jobs", "worker/__init__" (a floor's own package file)..."""
    out = []
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(root, package_dir).replace(os.sep, "/")
        out.extend(f[:-3] if rel == "." else rel + "/" + f[:-3] for f in files if f.endswith(".py"))
    return sorted(out)


def floor_of(module):
    """A module's floor: the first folder of its path ("" for the package's own files)."""
    return module.split("/")[0] if "/" in module else ""


def is_package_file(module):
    return module.rsplit("/", 1)[-1] == "__init__"


def _resolve(parts, known):
    """The module a dotted path under the package names: a folder's __init__ before a file of
    the same name (as Python does), else the longest prefix that names one."""
    parts = list(parts)
    while parts:
        for cand in ("/".join(parts + ["__init__"]), "/".join(parts)):
            if cand in known:
                return cand
        parts.pop()
    return "__init__"


def _targets(node, package, me, known):
    """The package's modules one import statement in module `me` names."""
    if isinstance(node, ast.Import):
        return [_resolve(a.name.split(".")[1:], known) for a in node.names
                if a.name.split(".")[0] == package]
    if node.level == 0:
        if (node.module or "").split(".")[0] != package:
            return []
        base = node.module.split(".")[1:]
    else:
        here = me.split("/")[:-1]  # the folders of me: its package (an __init__ is its own)
        if node.level - 1 > len(here):
            return []  # above the package: not its module
        base = here[:len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    out = []
    for alias in node.names:  # from x import y: y a module of the package, or a name of x's
        whole = base + [alias.name]
        named = "/".join(whole + ["__init__"]) in known or "/".join(whole) in known
        out.append(_resolve(whole if named else base, known))
    return out


def imports_of(package_dir):
    """{module: [(imported module, line, lazy)]} for every import of a module of the package by
    another (or itself), at module level or inside a function (lazy)."""
    package = os.path.basename(os.path.normpath(package_dir))
    known = set(modules_of(package_dir))
    graph = {}
    for m in sorted(known):
        path = os.path.join(package_dir, m + ".py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        top = {id(n) for n in tree.body}
        graph[m] = [(t, node.lineno, id(node) not in top)
                    for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for t in _targets(node, package, m, known)]
    return graph


def edges_of(graph):
    """{module: set of modules it imports}, leaving out package files (__init__): importing any
    module runs its packages' __init__ first, so an edge to one says nothing of the floors (the
    rule that keeps every __init__ light stops them importing anything at load)."""
    return {m: {t for t, _, _ in found if not is_package_file(t) and t != m}
            for m, found in graph.items()}


def circles(edges):
    """Every import circle, one per strongly connected group: a path that starts and ends at the
    group's first module, found by Tarjan's algorithm (iterative)."""
    index, low, on, stack, groups = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    group.append(x)
                    if x == v:
                        break
                if len(group) > 1:
                    groups.append(_path_in(sorted(group), edges))
    return groups


def _path_in(group, edges):
    """A circle through the group's first module, by breadth-first search inside the group."""
    start, members = group[0], set(group)
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v] & members):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return group + [start]


def layout_problems(modules):
    """Modules outside the floors' folders, folders that are no floor, floors that are no
    package."""
    out = []
    loose = sorted(m for m in modules if floor_of(m) == "" and m not in TOP)
    if loose:
        out.append("modules outside the floors' folders (move each into the folder of its floor, "
                   "one of %s): %s" % (", ".join(FLOOR_NAMES), ", ".join(m + ".py" for m in loose)))
    folders = sorted({floor_of(m) for m in modules} - {""})
    strangers = [f for f in folders if f not in FLOOR_NAMES]
    if strangers:
        out.append("folders that are no floor (use one of %s, or give the new floor its rules in "
                   "tests/eval/floor_check.py): %s" % (", ".join(FLOOR_NAMES),
                                                        ", ".join(f + "/" for f in strangers)))
    for f in folders:
        if f + "/__init__" not in modules:
            out.append("%s/ has no __init__.py (a one-line docstring of the floor's job)" % f)
    return out


def undocumented(package_dir):
    """Modules with no docstring: its first line is where the README sends a reader for a
    module's job (src/gpu/eval/README.md lists folders only)."""
    out = []
    for m in modules_of(package_dir):
        path = os.path.join(package_dir, m + ".py")
        with open(path, encoding="utf-8") as f:
            if not ast.get_docstring(ast.parse(f.read(), path)):
                out.append(m + ".py")
    return out


def problems(package_dir, entry_points):
    """Every breach of the floor plan, as lines a reader acts on; empty when the plan holds."""
    graph = imports_of(package_dir)
    edges = edges_of(graph)
    out = layout_problems(set(graph))
    bare = undocumented(package_dir)
    if bare:
        out.append("modules without a docstring (its first line says the module's job): %s"
                   % ", ".join(bare))
    for path in circles(edges):
        out.append("import circle: %s" % " -> ".join(path))
    for m in sorted(graph):
        for t, line, lazy in graph[m]:
            where = "%s.py:%d imports %s%s" % (m, line, t, " (lazily)" if lazy else "")
            mine, theirs = floor_of(m), floor_of(t)
            if is_package_file(m) and not lazy and t != m:
                out.append("%s: a package's __init__ must stay light at load (every import of "
                           "its modules runs it), import inside a function" % where)
            if is_package_file(t):
                continue
            if mine == "child" and theirs in ("judge", "worker"):
                out.append("%s: a child module (runs beside candidate code) imports a %s module; "
                           "move the shared fact down to common/, or let the child send data and "
                           "the worker judge it" % (where, theirs))
            if mine == "common" and theirs not in ("common", None):
                out.append("%s: common/ is the ground floor that every side reads, so it imports "
                           "only common/; move the fact down, or the code that needs both up"
                           % where)
            if theirs == "worker" and mine != "worker" and m not in entry_points:
                out.append("%s: only worker/ and the entry points import worker/ (%s is on %s)"
                           % (where, m, mine or "the package's top"))
            if t in entry_points and m not in entry_points:
                out.append("%s: an entry point is imported only by entry points" % where)
    return out


def floor_counts(package_dir):
    """Lines "floor/: N modules, M imports (-> floor k, ...): names", the package's own files
    first, then the floors in FLOOR_NAMES' order."""
    edges = edges_of(imports_of(package_dir))
    lines = []
    for floor in ("",) + FLOOR_NAMES:
        members = sorted(m for m in edges if floor_of(m) == floor and not is_package_file(m))
        to = {}
        for m in members:
            for t in edges[m]:
                to[floor_of(t)] = to.get(floor_of(t), 0) + 1
        lines.append("%-9s %2d modules, %3d imports (%s): %s" % (
            (floor + "/") if floor else "(top)", len(members), sum(to.values()),
            ", ".join("-> %s %d" % (f or "top", to[f]) for f in ("",) + FLOOR_NAMES if f in to)
            or "none", " ".join(m.rsplit("/", 1)[-1] for m in members)))
    return lines
