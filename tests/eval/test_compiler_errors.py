"""The compile log cut to its errors (compiler_errors.py), on real logs: g++ through load_inline
(torch's ninja log, captured on Debian 12's g++ 12 with libtorch-dev) and nvcc 13 with ptxas.
The end-to-end cut, from a live g++ build in a worker, is test_cpu_load_inline.py's."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.child import compiler_errors  # noqa: E402

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "compile_errors")


def log(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


class GxxTest(unittest.TestCase):
    def setUp(self):
        self.raw = log("gxx_load_inline.txt")
        self.cut = compiler_errors.cut(self.raw)

    def test_each_error_keeps_file_line_message_and_source_line(self):
        self.assertIn("compile failed, 3 errors", self.cut)
        self.assertIn("main.cpp:6:16: error: no matching function for call to "
                      "‘std::vector<int>::push_back(at::Tensor&)’", self.cut)
        self.assertIn("    6 |     v.push_back(a);", self.cut)
        self.assertIn("main.cpp:7:36: error: no match for ‘operator+’", self.cut)
        self.assertIn("main.cpp:8:14: error: ‘class at::Tensor’ has no member named ‘frobnicate’",
                      self.cut)
        self.assertIn("    8 |     return a.frobnicate(b);", self.cut)

    def test_notes_include_chains_and_command_lines_are_dropped(self):
        self.assertGreater(len(self.raw.splitlines()), 60)
        self.assertLess(len(self.cut.splitlines()), 20)
        for noise in ("note: candidate", "In file included from", "-isystem", "FAILED:",
                      "ninja: build stopped", "stl_vector.h", "/tmp/"):
            self.assertIn(noise, self.raw)
            self.assertNotIn(noise, self.cut)


class NvccTest(unittest.TestCase):
    def test_front_end_errors_keep_their_source_line_and_ptxas_its_message(self):
        cut = compiler_errors.cut(log("nvcc_ptxas.txt"))
        self.assertIn("compile failed, 3 errors", cut)
        self.assertIn('bad.cu(4): error: identifier "undefined_var" is undefined', cut)
        self.assertIn("if (i < n) c[i] = a[i] + b[i] + undefined_var;", cut)
        self.assertIn('bad.cu(6): error: expected a ";"', cut)
        self.assertIn("ptxas error   : Entry function '_Z3bigPf' uses too much shared data", cut)
        self.assertNotIn("errors detected in the compilation", cut)

    def test_a_build_folder_path_is_cut_to_the_file_name(self):
        line = "/root/.cache/kagent/job/torch_extensions/k-0123/cuda.cu(12): error: expected a \")\""
        cut = compiler_errors.cut("[1/3] /usr/local/cuda/bin/nvcc -c x\nFAILED: cuda.cuda.o\n" + line)
        self.assertIn('cuda.cu(12): error: expected a ")"', cut)
        self.assertNotIn("/root/", cut)


class BoundsTest(unittest.TestCase):
    def test_many_errors_are_counted_not_listed(self):
        text = "\n".join("main.cpp:%d:1: error: e%d" % (i, i) for i in range(1, 31))
        cut = compiler_errors.cut(text)
        self.assertIn("compile failed, 30 errors", cut)
        self.assertIn("main.cpp:8:1: error: e8", cut)
        self.assertNotIn("e9\n", cut + "\n")
        self.assertIn("22 more errors not shown", cut)

    def test_an_unrecognised_log_keeps_its_last_lines_without_commands(self):
        text = "[1/2] c++ -c main.cpp -o main.o\nFAILED: main.o\nc++ -c main.cpp\n" + "\n".join(
            "line %d" % i for i in range(40)) + "\nninja: build stopped: subcommand failed."
        cut = compiler_errors.cut(text)
        self.assertIn("no error line recognised", cut)
        self.assertIn("line 39", cut)
        self.assertNotIn("line 10\n", cut)
        self.assertNotIn("FAILED", cut)
        self.assertLessEqual(len(compiler_errors.cut("x" * 10000)), compiler_errors.MAX_CHARS)


if __name__ == "__main__":
    unittest.main()
