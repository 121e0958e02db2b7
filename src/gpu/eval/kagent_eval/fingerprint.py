"""Fingerprints that let the agent spot duplicate candidates."""
import ast
import hashlib


def of_source(source):
    """Hash of the code's syntax tree: comments, blank lines and formatting do not count."""
    try:
        norm = ast.dump(ast.parse(source), annotate_fields=False, include_attributes=False)
    except SyntaxError:
        norm = "\n".join(line.rstrip() for line in source.splitlines() if line.strip())
    return hashlib.sha256(norm.encode()).hexdigest()[:16]
