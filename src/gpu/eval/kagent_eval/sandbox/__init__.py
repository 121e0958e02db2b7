"""The fork server and the jail every child enters (namespaces, Landlock, seccomp, cgroups)."""
