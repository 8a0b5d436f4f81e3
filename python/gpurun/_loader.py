"""Where the gpurun package finds libgpurun, and the package's version.

The library, in this order: GPURUN_LIB when it is set (only that file: a wrong GPURUN_LIB is an
error, never a silent fall-back to another library); the absolute path CMake wrote into
_libpath.py (the build tree's library, or the installed one after cmake --install); the prefix the
package was built for (GPURUN_PREFIX at pip install time, in _libpath.py) and the prefix it is
installed in (sys.prefix), each under lib/, lib64/ and lib/<multiarch>/; then the dynamic loader's
own search (LD_LIBRARY_PATH, ld.so.cache) by soname. A failure names every place it tried.
"""
import ctypes
import os
import re
import sys

_SONAMES = ("libgpurun.so.0", "libgpurun.so")


def _libdirs(prefix):
    dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    multiarch = getattr(sys.implementation, "_multiarch", None)
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def candidates():
    """[(how, path or soname)] in the order load() tries them."""
    lib = os.environ.get("GPURUN_LIB")
    if lib:
        return [("GPURUN_LIB", lib)]
    found = []
    recorded = None
    try:
        from . import _libpath  # written by CMake, or by setup.py for GPURUN_PREFIX
        if getattr(_libpath, "LIB", None):
            found.append(("the library CMake recorded", _libpath.LIB))
        recorded = getattr(_libpath, "PREFIX", None)
    except ImportError:
        pass
    prefixes = []
    if recorded:
        prefixes.append(("the prefix recorded at install (GPURUN_PREFIX)", recorded))
    prefixes.append(("the installed prefix (sys.prefix)", sys.prefix))
    for how, prefix in prefixes:
        for d in _libdirs(prefix):
            found.append((how, os.path.join(d, _SONAMES[0])))
    for name in _SONAMES:
        found.append(("the loader path", name))
    return found


def load():
    """The loaded libgpurun (ctypes.CDLL); ImportError naming every place tried."""
    tried = []
    for how, name in candidates():
        if os.sep in name and not os.path.exists(name):
            tried.append("%s: %s: no such file" % (how, name))
            continue
        try:
            # RTLD_GLOBAL: Open MPI's plugins, dlopen'ed later, resolve libmpi's symbols globally
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append("%s: %s" % (how, e))
    raise ImportError("gpurun: cannot load libgpurun (set GPURUN_LIB to its path); tried " +
                      "; ".join(tried))


def version():
    """The project's version: written at build or install time, else the source tree's
    CMakeLists.txt (a package used straight from python/), else "unknown"."""
    try:
        from . import _version
        return _version.VERSION
    except ImportError:
        pass
    top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "CMakeLists.txt")
    try:
        with open(top, encoding="utf-8") as f:
            m = re.search(r"^project\(gpurun\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", f.read(), re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    return "unknown"
