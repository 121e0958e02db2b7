"""The extension cache's key (ext_build.py): a load_inline call builds in a folder of its own,
named by everything that decides the module built, so no two sources, flag sets, architectures
or torch versions share one (the build from a cache hit is test_cpu_load_inline.py's)."""
import os
import sys
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src", "gpu", "eval"))
from kagent_eval.child import ext_build  # noqa: E402

FAKE_TORCH = types.SimpleNamespace(__version__="2.11.0", version=types.SimpleNamespace(cuda="13.0"))
CALL = {"cpp_sources": "torch::Tensor f(torch::Tensor x);", "cuda_sources": "__global__ void k() {}",
        "functions": ["f"]}


def folder(name="ext", torch=FAKE_TORCH, arch="9.0", **changes):
    with mock.patch.dict(os.environ, {"TORCH_EXTENSIONS_DIR": "/cache/te",
                                      "TORCH_CUDA_ARCH_LIST": arch}):
        return ext_build.folder(torch, name, dict(CALL, **changes))


class KeyTest(unittest.TestCase):
    def test_the_same_call_finds_the_same_folder_under_the_extensions_dir(self):
        self.assertEqual(folder(), folder())
        self.assertTrue(folder().startswith("/cache/te/ext-"))

    def test_whatever_decides_the_module_names_another_folder(self):
        base = folder()
        others = {
            "source": folder(cuda_sources="__global__ void k() { }"),
            "functions": folder(functions=["f", "g"]),
            "flags": folder(extra_cuda_cflags=["-O3", "--use_fast_math"]),
            "name": folder(name="ext2"),
            "arch": folder(arch="8.0"),
            "torch": folder(torch=types.SimpleNamespace(__version__="2.10.0",
                                                        version=FAKE_TORCH.version)),
            "cuda": folder(torch=types.SimpleNamespace(__version__="2.11.0",
                                                       version=types.SimpleNamespace(cuda="12.8"))),
        }
        for what, path in others.items():
            self.assertNotEqual(path, base, what)
        self.assertEqual(len(set(others.values())), len(others))

    def test_a_name_is_made_safe_for_a_folder(self):
        path = folder(name="../../x y")
        self.assertEqual(os.path.dirname(path), "/cache/te")  # one folder in it, never above
        self.assertNotIn(" ", path)

    def test_only_a_source_that_names_load_inline_gets_the_compile_step(self):
        self.assertTrue(ext_build.uses_load_inline("from torch.utils.cpp_extension import load_inline"))
        self.assertFalse(ext_build.uses_load_inline("import triton\n@triton.jit\ndef k(): pass\n"))


if __name__ == "__main__":
    unittest.main()
