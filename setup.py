"""Build traceml._core, the C core (plain C99, CPython and NumPy C APIs)."""

import numpy
from setuptools import Extension, setup

core = Extension(
    "traceml._core",
    sources=[
        "csrc/module.c",
        "csrc/recorder.c",
        "csrc/store.c",
        "csrc/probes.c",
        "csrc/wrap.c",
        "csrc/batchlog.c",
        "csrc/itemlog.c",
        "csrc/stacks.c",
        "csrc/livehist.c",
        "csrc/reduce.c",
        "csrc/reduce_py.c",
        "csrc/sampler.c",
        "csrc/sampler_py.c",
        "csrc/procfs.c",
        "csrc/nvml.c",
    ],
    depends=[
        "csrc/clock.h",
        "csrc/compat.h",
        "csrc/hint.h",
        "csrc/module.h",
        "csrc/nvml.h",
        "csrc/procfs.h",
        "csrc/reduce.h",
        "csrc/sampler.h",
        "csrc/store.h",
    ],
    include_dirs=[numpy.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    extra_compile_args=[
        "-std=c99",
        "-O2",
        "-Wall",
        "-Wextra",
        "-fvisibility=hidden",
        # Calls into libc and libpython (clock_gettime above all) go
        # through the GOT, not a PLT stub: one instruction cache line less
        # per clock read on the per-step paths (benchmarks/README.md,
        # "The last two targets").
        "-fno-plt",
        "-pthread",
    ],
    extra_link_args=["-pthread"],
    # dlopen() of libnvidia-ml at run time (csrc/nvml.c); a stub in glibc
    # 2.34 and later, needed before.
    libraries=["dl", "rt"],
)

setup(ext_modules=[core])
