"""The evaluator's floor plan, checked (test_floors.py): every import between the modules of one
flat package, read from their source with ast (module level and lazy, inside functions), each
module's role from one declared map, and the rules imports between roles must keep.

The checker takes the package's folder, so test_floors.py runs it on kagent_eval and on small
FAKE packages made in a temp folder, whose planted faults it must find."""
import ast
import os

ROLE_NAMES = ("worker", "judge", "child", "sandbox", "profile", "analyze", "common")


def modules_of(package_dir):
    """The package's modules: its .py files, by name without the suffix."""
    return sorted(f[:-3] for f in os.listdir(package_dir)
                  if f.endswith(".py") and os.path.isfile(os.path.join(package_dir, f)))


def _targets(node, package, names):
    """The package's modules one import statement names ("__init__" for the package itself)."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == package:
                out.append(parts[1] if len(parts) > 1 else "__init__")
        return out
    absolute = node.level == 0 and (node.module or "").split(".")[0] == package
    if node.level == 1 or absolute:
        parts = (node.module or "").split(".") if node.level == 1 else node.module.split(".")[1:]
        parts = [p for p in parts if p]
        if parts:  # from .x import y, from package.x import y
            out.append(parts[0])
        else:  # from . import x, y; from package import x: a module, or a name of the package's
            out.extend(a.name if a.name in names else "__init__" for a in node.names)
    return out


def imports_of(package_dir):
    """{module: [(imported module, line, lazy)]} for every import of a module of the package by
    another (or itself), at module level or inside a function (lazy)."""
    package = os.path.basename(os.path.normpath(package_dir))
    names = set(modules_of(package_dir))
    graph = {}
    for m in sorted(names):
        path = os.path.join(package_dir, m + ".py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        top = {id(n) for n in tree.body}
        found = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(node, package, names):
                    found.append((t, node.lineno, id(node) not in top))
        graph[m] = found
    return graph


def edges_of(graph):
    """{module: set of modules it imports}, leaving out the package itself: every module's import
    runs __init__ first, so an edge to it says nothing of the floors (rule_package_light keeps
    __init__ from importing anything at load)."""
    return {m: {t for t, _, _ in found if t != "__init__" and t != m} for m, found in graph.items()}


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


def problems(package_dir, roles, entry_points):
    """Every breach of the floor plan, as lines a reader acts on; empty when the plan holds."""
    graph = imports_of(package_dir)
    edges = edges_of(graph)
    out = []
    unmapped = sorted(set(graph) - set(roles))
    if unmapped:
        out.append("modules with no role in the floor map (add each to ROLES in "
                   "tests/eval/test_floors.py, on the floor where it belongs): %s"
                   % ", ".join(unmapped))
    stale = sorted(set(roles) - set(graph))
    if stale:
        out.append("the floor map names modules that do not exist: %s" % ", ".join(stale))
    bad_roles = sorted(m for m, r in roles.items() if r not in ROLE_NAMES)
    if bad_roles:
        out.append("unknown roles (one of %s): %s" % (", ".join(ROLE_NAMES), ", ".join(
            "%s=%s" % (m, roles[m]) for m in bad_roles)))
    for path in circles(edges):
        out.append("import circle: %s" % " -> ".join(path))
    for m in sorted(graph):
        for t, line, lazy in graph[m]:
            where = "%s.py:%d imports %s%s" % (m, line, t, " (lazily)" if lazy else "")
            mine, theirs = roles.get(m), roles.get(t)
            if m == "__init__" and not lazy and t != "__init__":
                out.append("%s: the package must stay light at load (every module's import "
                           "runs it), import inside a function" % where)
            if t == "__init__":
                continue
            if mine == "child" and theirs in ("judge", "worker"):
                out.append("%s: a child module (runs beside candidate code) imports a %s module; "
                           "move the shared fact down to a common module, or let the child send "
                           "data and the worker judge it" % (where, theirs))
            if theirs == "worker" and mine != "worker" and m not in entry_points:
                out.append("%s: only worker modules and entry points import the worker's "
                           "modules (%s is %s)" % (where, m, mine))
            if t in entry_points and m not in entry_points:
                out.append("%s: an entry point is imported only by entry points" % where)
    return out


def role_counts(package_dir, roles):
    """Lines "role: N modules, M imports (-> role k, ...)" of the roles in ROLE_NAMES' order."""
    edges = edges_of(imports_of(package_dir))
    lines = []
    for role in ROLE_NAMES:
        members = sorted(m for m in edges if roles.get(m) == role)
        to = {}
        for m in members:
            for t in edges[m]:
                to[roles.get(t, "?")] = to.get(roles.get(t, "?"), 0) + 1
        lines.append("%-8s %2d modules, %3d imports (%s): %s" % (
            role, len(members), sum(to.values()),
            ", ".join("-> %s %d" % (r, to[r]) for r in ROLE_NAMES + ("?",) if r in to) or "none",
            " ".join(members)))
    return lines
