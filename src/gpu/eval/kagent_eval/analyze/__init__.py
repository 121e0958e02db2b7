"""The analyze op: a problem's traced graph, its ops, Inductor's kernels, merged sources."""
