"""A candidate that defines neither ModelNew nor kernel_function: the load error says what the
file does define (its own classes and functions, not what it imports), so the user sees the
class that was meant to be ModelNew (loader.py)."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "src", "gpu", "eval"))
from kagent_eval.common import loader  # noqa: E402

NO_MODELNEW = ("import os\nfrom os.path import join\n\nclass MyKernel:\n    pass\n\n"
               "class Helper:\n    pass\n\ndef launch(x):\n    return x\n")


class LoadErrorNamesWhatWasFound(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        # load_module writes the source to a temporary file: into this test's own folder
        self.addCleanup(setattr, tempfile, "tempdir", tempfile.tempdir)
        tempfile.tempdir = self.tmp.name

    def test_lists_the_classes_and_functions_defined(self):
        module = loader.load_module("candidate", NO_MODELNEW)
        with self.assertRaises(LookupError) as e:
            loader.build_candidate(None, module, None, [], 0, "fp32", "cpu")
        self.assertEqual(str(e.exception), "candidate defines neither ModelNew nor kernel_function "
                         "(classes found: Helper, MyKernel; functions found: launch)")

    def test_says_none_when_nothing_is_defined(self):
        module = loader.load_module("candidate", "import os\nx = 1\n")
        with self.assertRaises(LookupError) as e:
            loader.build_candidate(None, module, None, [], 0, "fp32", "cpu")
        self.assertIn("(classes found: none; functions found: none)", str(e.exception))


if __name__ == "__main__":
    unittest.main()
