"""The parts of the package pyproject.toml cannot express: the version, read from the project's
CMakeLists.txt (project(gpurun VERSION x.y.z)), and the library's prefix (GPURUN_PREFIX at build
time), both written into the built package (_version.py, _libpath.py)."""
import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def project_version():
    path = os.path.join(HERE, "..", "CMakeLists.txt")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("gpurun: cannot read the project version from %s: %s" % (path, e))
    m = re.search(r"^project\(gpurun\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text, re.M)
    if not m:
        raise SystemExit("gpurun: %s has no project(gpurun VERSION x.y.z)" % path)
    return m.group(1)


def library_prefix():
    prefix = os.environ.get("GPURUN_PREFIX", "")
    if not prefix:
        return None
    if not os.path.isabs(prefix) or any(c in prefix for c in "\n\r\0"):
        raise SystemExit("gpurun: GPURUN_PREFIX must be an absolute path, got %r" % prefix)
    return os.path.normpath(prefix)


VERSION = project_version()
PREFIX = library_prefix()


class BuildPy(build_py):
    """build_py that also writes gpurun/_version.py and, with GPURUN_PREFIX, gpurun/_libpath.py."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "gpurun")
        with open(os.path.join(pkg, "_version.py"), "w", encoding="utf-8") as f:
            f.write("VERSION = %r\n" % VERSION)
        libpath = os.path.join(pkg, "_libpath.py")
        if PREFIX:
            with open(libpath, "w", encoding="utf-8") as f:
                f.write("LIB = None\nPREFIX = %r\n" % PREFIX)
        elif os.path.exists(libpath):
            os.unlink(libpath)


setup(version=VERSION, cmdclass={"build_py": BuildPy})
