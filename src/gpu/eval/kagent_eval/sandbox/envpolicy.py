"""The environment allow-list (env_allow.txt, shared with kagent/gpu.lua and kagent/secrets.lua).

The worker keeps only the variables the list allows (worker.py starts itself again with them), so
neither it nor the processes it forks hold an API key, whoever started it."""
import os

LIST_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "env_allow.txt")


def _load(path=LIST_PATH):
    names, prefixes, secret_words = set(), [], set()
    with open(path) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if len(words) != 2:
                continue
            kind, value = words
            if kind == "allow" and value.endswith("*"):
                prefixes.append(value[:-1])
            elif kind == "allow":
                names.add(value)
            elif kind == "secret":
                secret_words.add(value)
    return names, tuple(prefixes), secret_words


NAMES, PREFIXES, SECRET_WORDS = _load()


def looks_secret(name):
    return any(word in SECRET_WORDS for word in name.upper().split("_"))


def allowed(name):
    return (name in NAMES or name.startswith(PREFIXES)) and not looks_secret(name)


def scrubbed(environ):
    """The allowed part of `environ` (a mapping)."""
    return {k: v for k, v in environ.items() if allowed(k)}
