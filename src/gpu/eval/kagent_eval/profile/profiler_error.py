"""The profiler's error type, shared by the CUPTI path (``profiling``) and the Nsight Compute
CLI path (``ncu_cli``) so that neither imports the other to raise it."""


class ProfilerError(Exception):
    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
