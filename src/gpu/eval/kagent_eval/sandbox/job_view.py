"""The filesystem a job's mount namespace shows (README.md "Sandbox", local sockets): the folders
where named UNIX sockets live are covered, and only what the job needs is bound back in.
namespaces.enter does the mounting; jail.py decides what a job is granted.

Landlock has no rule for connecting to a socket file, and a socket is a door: a tmux server runs
a shell command for any client of its user (`tmux -S <socket> run-shell`), an ssh-agent lists and
signs with its keys. So the job's view covers the folders they live in, whole, and binds back the
narrowest paths the job needs: a socket inside a folder that is bound back is reachable again."""
import os
import pwd
import shutil
import tempfile

from ..common.loader import source_of

# secrets of the machine a job never needs, even where the folder holding them is readable:
# left out of the read rule and covered in the job's mount namespace
SECRET_PATHS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
                "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd",
                "/etc/krb5.keytab")
# where named UNIX sockets live: the machine's daemons' (/run: systemd, D-Bus, Docker; /var/run
# links to it; /dev/log) and its users' own (a tmux server's in /tmp/tmux-<uid>, an ssh-agent's in
# /tmp/ssh-*, X11's in /tmp/.X11-unix, anything in a home folder). Covered by an empty folder (or
# file) with the worker's own temp folder, home and per-user folder wherever they are
SOCKET_FOLDERS = ("/run", "/tmp", "/var/tmp", "/home", "/root", "/dev/log")
# the fields of a job that name a file its child loads (or hold its source text): the problem
# and candidate of every job, and an integrate job's kernel, its problem and its adapter
FILE_FIELDS = ("problem", "candidate", "kernel_problem", "kernel", "adapter")
# bound back in for CUDA: its start talks to nvidia-persistenced over its socket where it runs
KEPT_PATHS = ("/run/nvidia-persistenced", "/run/nvidia-fabricmanager")


def under(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _own_home():
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None


class View:
    """environ: the worker's; root: its per-user folder (the other jobs' folders are in it);
    read_roots: the folders outside the system's a job reads (Python's, KAGENT_EVAL_READ_PATHS,
    the CUPTI library's); system_roots: the system folders it reads (never covered)."""

    def __init__(self, environ, root, read_roots, system_roots):
        homes = [environ.get("HOME"), _own_home()]
        self.covered = [os.path.realpath(p) for p in SOCKET_FOLDERS]
        for p in [tempfile.gettempdir(), root] + homes:
            if not (p and os.path.isabs(p)):
                continue
            p = os.path.realpath(p)
            # "/" or a folder holding a system one (HOME=/opt) is not covered: that would hide
            # the toolchains
            if p != "/" and not any(under(r, p) for r in system_roots if r != "/run"):
                self.covered.append(p)
        self.covered = list(dict.fromkeys(self.covered))
        # the read roots under a covered folder are bound back read-only, but never a whole home
        # or temp folder (its sockets would be reachable again): those stay covered
        whole = set(self.covered) | {os.path.realpath(h) for h in homes if h}
        back, self.left_covered = set(), set()
        for path in read_roots:
            real = os.path.realpath(path)
            if any(under(real, c) for c in self.covered) and os.path.exists(real):
                (self.left_covered if real in whole or os.path.dirname(real) == "/home"
                 else back).add(real)
        self.bound_back = sorted(back)
        self.left_covered = sorted(self.left_covered)

    def note(self):
        """What the ready line's `missing` says of the read roots left covered, or None."""
        if self.left_covered:
            return ("%s: a whole home or temp folder, named where the job reads (sys.path, "
                    "KAGENT_EVAL_READ_PATHS), stays covered in the job's mount namespace, so its "
                    "sockets stay out of reach: name the folders inside it the job needs"
                    % ", ".join(self.left_covered))
        return None

    def mount_args(self, writable, files=()):
        """namespaces.enter's arguments: covered, the secret files and the socket folders; bound
        back writable, `writable` (the job's folder and cache: what Landlock lets it write);
        read-only, the read roots under a covered folder and the job's own files themselves,
        not the folders that hold them (a problem under a home, a candidate in /tmp)."""
        return {"hidden": SECRET_PATHS + tuple(self.covered),
                "kept": KEPT_PATHS + tuple(os.path.realpath(p) for p in writable),
                "kept_read_only": tuple(self.bound_back) + tuple(dict.fromkeys(
                    p for f in files for p in _both(f)))}

    def shows(self, path, job_dir):
        """Whether the view of a job in `job_dir`, made before its files were known (a spare's),
        shows `path`: outside every covered folder, or under what is bound back in."""
        inside = [os.path.realpath(job_dir)] + self.bound_back
        return all(not any(under(p, c) for c in self.covered) or any(under(p, k) for k in inside)
                   for p in _both(path))

    def staged(self, spec, job_dir):
        """`spec` as a spare (forked before its job) is sent it: each file it names (problem,
        candidate, candidates) that the spare's view covers is copied into its folder, which is
        bound in from the host, so it shows what the worker puts there later; the copy keeps the
        file's name. `spec` itself is left as it is."""
        copies = []

        def stage(name):
            if not (isinstance(name, str) and name and source_of(name)[1]) \
                    or self.shows(name, job_dir):
                return name
            folder = os.path.join(job_dir, "job-file-%d" % len(copies))
            os.mkdir(folder, 0o700)
            copies.append(os.path.join(folder, os.path.basename(name)))
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with open(name, "rb") as src, os.fdopen(os.open(copies[-1], flags, 0o400), "wb") as dst:
                shutil.copyfileobj(src, dst)
            return copies[-1]

        out = dict(spec)
        for key in FILE_FIELDS:
            if key in spec:
                out[key] = stage(spec[key])
        if spec.get("candidates"):
            out["candidates"] = [stage(c) for c in spec["candidates"]]
        return out


def _both(path):
    """A file as the job opens it (its absolute path: a link on it, say /tmp/shared -> /work/shared,
    is under a covered folder) and where it really is: the view must show it at both."""
    return (os.path.abspath(path), os.path.realpath(path))


def readable(roots, hidden):
    """`roots` with every path of `hidden` left out: a root holding one is replaced by its
    entries (each but the hidden one, and so on down). Landlock grants only add, so a hidden
    file is one no rule reaches."""
    hidden = [os.path.normpath(h) for h in hidden]
    out = []
    for root in roots:
        root = os.path.normpath(root)
        if any(root == h or root.startswith(h + "/") for h in hidden):
            continue
        if not any(h.startswith(root.rstrip("/") + "/") for h in hidden) or not os.path.isdir(root):
            out.append(root)
            continue
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        out += readable([os.path.join(root, e) for e in entries], hidden)
    return out
