"""Builds the visdev extension and its wheel from the library's own sources.

Run by `make python` (which first generates the demo server's C file):
    python3 setup.py build_ext --build-lib ../build/python
    python3 setup.py bdist_wheel --dist-dir ../build/python
"""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("VISDEV_BUILD", os.path.join(ROOT, "build"))


def version():
    with open(os.path.join(ROOT, "include", "visdev.h")) as f:
        for line in f:
            if line.startswith("#define VD_VERSION"):
                return line.split('"')[1]
    raise RuntimeError("no VD_VERSION in include/visdev.h")


sources = ["_visdev.c"] + [os.path.relpath(p, HERE) for p in sorted(glob.glob(os.path.join(ROOT, "src", "lib", "*.c")))]
sources.append(os.path.relpath(os.path.join(BUILD, "gen", "demo_json.c"), HERE))

setup(
    name="visdev",
    version=version(),
    description="Choose and lease NVIDIA GPUs from inside a script, before import torch",
    ext_modules=[
        Extension(
            "visdev._visdev",
            sources=sources,
            include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "src", "lib")],
            define_macros=[("_GNU_SOURCE", None)],
            extra_compile_args=["-std=c11", "-fvisibility=hidden"],
            libraries=["jansson", "dl"],
        )
    ],
    packages=["visdev"],
    package_data={"visdev": ["py.typed", "__init__.pyi"]},
)
