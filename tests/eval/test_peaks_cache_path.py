"""Where the measured GPU peaks are cached (roofline._cache_path): $KAGENT_CACHE_DIR, else
$XDG_CACHE_HOME/kagent, else ~/.cache/kagent. No GPU needed: only the path is computed."""
import os
import unittest
from unittest import mock

from kagent_eval.profile import roofline


class PeaksCachePath(unittest.TestCase):
    def path(self, env):
        with mock.patch.dict(os.environ, env, clear=False):
            for k in ("KAGENT_CACHE_DIR", "XDG_CACHE_HOME"):
                if k not in env:
                    os.environ.pop(k, None)
            return roofline._cache_path("NVIDIA H100 80GB HBM3")

    def test_xdg_cache_home(self):
        self.assertEqual(self.path({"XDG_CACHE_HOME": "/srv/cache"}),
                         "/srv/cache/kagent/peaks-v2-NVIDIA_H100_80GB_HBM3.json")

    def test_kagent_cache_dir_first(self):
        self.assertEqual(self.path({"XDG_CACHE_HOME": "/srv/cache", "KAGENT_CACHE_DIR": "/k"}),
                         "/k/peaks-v2-NVIDIA_H100_80GB_HBM3.json")

    def test_home_otherwise(self):
        want = os.path.join(os.path.expanduser("~"), ".cache", "kagent", "peaks-v2-NVIDIA_H100_80GB_HBM3.json")
        self.assertEqual(self.path({}), want)
        self.assertEqual(self.path({"XDG_CACHE_HOME": "relative/dir"}), want, "a relative path is ignored")


if __name__ == "__main__":
    unittest.main()
