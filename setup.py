"""Build script for the native part of cakernels.

All metadata lives in pyproject.toml; this file only declares the C
extension ``cakernels._native`` (native/ck_kernel.c + native/_nativemodule.c)
and picks the compiler flags.  The extension uses the buffer protocol, so the
build needs neither NumPy headers nor anything beyond setuptools + wheel.

Environment variables
---------------------
CAKERNELS_DISABLE_OPENMP=1
    Build without OpenMP even when the compiler supports it.  Otherwise
    OpenMP is used when a tiny OpenMP program compiles *and links* with the
    compiler that builds the extension (``-fopenmp``, or ``/openmp`` for
    MSVC); when it does not (e.g. Apple clang without libomp), the build
    silently falls back to serial code.
CAKERNELS_NO_SIMD_DISPATCH=1
    Compile only the baseline-ISA loops (no AVX2/AVX-512F variants chosen at
    run time); ``cakernels._native.simd_path()`` then returns 'baseline'.
    For testing the portable path on machines that have AVX2/AVX-512.
CAKERNELS_SANITIZE=1
    Build with AddressSanitizer + UndefinedBehaviorSanitizer (for CI).  The
    Python interpreter itself is not instrumented, so the ASan runtime has to
    be loaded first and leak checking disabled (CPython "leaks" by design)::

        CAKERNELS_SANITIZE=1 python setup.py build_ext --inplace --force
        LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 \\
            python -m pytest tests/test_native.py -p no:cacheprovider

    libubsan is a dependency of the extension and loads by itself (preloading
    it too, after libasan, also works).  UB is made fatal
    (-fno-sanitize-recover=undefined) so that it fails the run.
    Rebuild normally afterwards (``python setup.py build_ext --inplace --force``).

Typical development build: ``python setup.py build_ext --inplace``.

The flags of a build are recorded beside its object files
(``build/temp.*/cakernels._native.build-flags.json``): a later build with other
flags (another of the variables above, CC, CFLAGS, LDFLAGS) rebuilds the module
instead of reusing the one in ``build/lib.*``, which ``pip install .`` would
otherwise package.
"""

import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import textwrap

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The test program uses every OpenMP construct of the sources (OpenMP 4.0:
# seq_cst atomics, simd reductions), so that a compiler whose OpenMP is older
# (MSVC's /openmp is OpenMP 2.0, which refuses "atomic read") builds the serial
# code instead of failing the build.
OPENMP_TEST_PROGRAM = textwrap.dedent(
    """\
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int n = 0, seen = 0, old = 0, i;
        double v[4] = {1.0, 3.0, 2.0, 0.5}, top = 0.0;
    #pragma omp parallel reduction(+:n)
        n += 1;
    #pragma omp atomic write seq_cst
        seen = n;
    #pragma omp atomic capture seq_cst
        { old = seen; seen += 1; }
    #pragma omp atomic read seq_cst
        i = seen;
    #pragma omp simd reduction(max : top)
        for (int k = 0; k < 4; ++k)
            top = v[k] > top ? v[k] : top;
        printf("%d %d %d %d %g\\n", n, old, i, omp_get_max_threads(), top);
        return n >= 1 ? 0 : 1;
    }
    """
)

# The serial build still honours the sources' "omp simd" reductions with
# -fopenmp-simd (GCC, Clang: no runtime library) when the compiler takes it.
SIMD_TEST_PROGRAM = textwrap.dedent(
    """\
    int main(void) {
        double v[4] = {1.0, 3.0, 2.0, 0.5}, top = 0.0;
    #pragma omp simd reduction(max : top)
        for (int k = 0; k < 4; ++k)
            top = v[k] > top ? v[k] : top;
        return top == 3.0 ? 0 : 1;
    }
    """
)

# Flags, all value-preserving (none of them changes a single computed bit):
#   -O3                 enables the loop vectoriser;
#   -fno-math-errno     math functions need not set errno (pure calls);
#   -fno-trapping-math  FP operations are assumed not to trap (IEEE non-stop
#                       mode, which is what CPython/NumPy run in).  Without it
#                       GCC jump-threads the clamps of ck_exp() into branches
#                       and the RBF loop is not vectorised (~3x slower);
#   -ffp-contract=off   a*b+c stays two roundings on every target (no silent
#                       FMA), so kernel values are bit-identical across ISAs,
#                       SIMD widths and thread counts.
# Deliberately absent: -march=native (wheels must be portable) and
# -ffast-math / -fassociative-math / -ffinite-math-only (ck_exp() relies on
# IEEE rounding and NaN must propagate; see native/ck_kernel.c).
GCC_LIKE_COMPILE_ARGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off"]
MSVC_COMPILE_ARGS = ["/O2", "/fp:precise"]

SANITIZE_ARGS = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
    "-g",
    "-O1",
]


NATIVE_SOURCES = [
    "native/ck_kernel.c",
    "native/ck_linalg.c",
    "native/ck_rows.c",
    "native/ck_qcache.c",
    "native/ck_smo.c",
    "native/ck_asygcd.c",
    "native/_nativemodule.c",
]
NATIVE_HEADERS = ["native/cakernels.h", "native/ck_internal.h"]


def native_source_hash(root="."):
    """sha256 over the C sources and headers (the same function as
    ``cakernels._native_loader.source_hash``): compiled into the module so
    that a source tree can tell whether an installed module matches it."""
    h = hashlib.sha256()
    for rel in sorted(NATIVE_SOURCES + NATIVE_HEADERS):
        with open(os.path.join(root, rel), "rb") as fh:
            data = fh.read().replace(b"\r\n", b"\n")
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def _env_flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _openmp_flags(compiler, program=OPENMP_TEST_PROGRAM, candidates=None):
    """Return (compile_args, link_args) for OpenMP, or None if unusable (the
    first of ``candidates`` that builds ``program``)."""
    if candidates is None and compiler.compiler_type == "msvc":
        candidates = [(["/openmp"], [])]
    elif candidates is None:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
    tmpdir = tempfile.mkdtemp(prefix="cakernels_omp_")
    try:
        src = os.path.join(tmpdir, "omp_test.c")
        with open(src, "w") as fh:
            fh.write(program)
        # the extension's own link takes LDFLAGS; the test program's must too (with
        # CFLAGS=-fsanitize=thread alone the probe failed to link, and the build
        # fell back to serial code)
        env_ldflags = shlex.split(os.environ.get("LDFLAGS", ""))
        for cflags, lflags in candidates:
            try:
                objects = compiler.compile([src], output_dir=tmpdir, extra_postargs=cflags)
                compiler.link_executable(
                    objects, "omp_test", output_dir=tmpdir,
                    extra_postargs=lflags + env_ldflags
                )
            except Exception as exc:  # CompileError / LinkError (distutils or setuptools)
                print(f"cakernels: OpenMP test program ({' '.join(cflags)}): {exc}")
                continue
            return cflags, lflags
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return None


class BuildExt(build_ext):
    """build_ext that adds optimisation, OpenMP and sanitizer flags."""

    def build_extensions(self):
        compiler = self.compiler
        msvc = compiler.compiler_type == "msvc"
        compile_args = list(MSVC_COMPILE_ARGS if msvc else GCC_LIKE_COMPILE_ARGS)
        link_args = []

        if _env_flag("CAKERNELS_DISABLE_OPENMP"):
            self.announce("cakernels: OpenMP disabled by CAKERNELS_DISABLE_OPENMP", level=2)
            print("cakernels: building without OpenMP (CAKERNELS_DISABLE_OPENMP)")
        else:
            flags = _openmp_flags(compiler)
            if flags is None:
                print("cakernels: OpenMP test program failed to build; building without OpenMP")
            else:
                print(f"cakernels: building with OpenMP ({' '.join(flags[0])})")
                compile_args += flags[0]
                link_args += flags[1]

        macros = [("CK_SOURCE_HASH", '"%s"' % native_source_hash())]
        if not msvc and not any("-fopenmp" == f for f in compile_args):
            # without OpenMP threads, still honour the `omp simd` reductions
            # of the solvers (GCC/Clang; no runtime library involved), when
            # the compiler takes the flag (a failed probe: plain loops)
            if _openmp_flags(compiler, SIMD_TEST_PROGRAM,
                             [(["-fopenmp-simd"], [])]) is not None:
                compile_args.append("-fopenmp-simd")
                macros.append(("CK_OPENMP_SIMD", "1"))
            else:
                print("cakernels: the compiler takes no -fopenmp-simd; plain loops")
        if _env_flag("CAKERNELS_NO_SIMD_DISPATCH"):
            print("cakernels: baseline ISA only (CAKERNELS_NO_SIMD_DISPATCH)")
            macros.append(("CK_NO_SIMD_DISPATCH", "1"))

        if _env_flag("CAKERNELS_SANITIZE"):
            if msvc:
                sys.exit("CAKERNELS_SANITIZE=1 is only supported with GCC/Clang")
            print("cakernels: building with ASan + UBSan")
            compile_args += SANITIZE_ARGS  # -O1 after -O3: the last one wins
            link_args += SANITIZE_ARGS

        for ext in self.extensions:
            ext.extra_compile_args = compile_args + list(ext.extra_compile_args or [])
            ext.extra_link_args = link_args + list(ext.extra_link_args or [])
            ext.define_macros = list(ext.define_macros or []) + macros
            if not msvc and "m" not in (ext.libraries or []):
                # tanh/pow/isfinite come from libm; do not rely on the
                # interpreter having loaded it already
                ext.libraries = list(ext.libraries or []) + ["m"]
        super().build_extensions()

    # build_ext rebuilds only when a source is newer than the built module, so after
    # `CAKERNELS_DISABLE_OPENMP=1 python setup.py build_ext --inplace` (or
    # CAKERNELS_SANITIZE=1) a later `pip install .` packaged the variant left in
    # build/lib.*. A stamp of the flags beside the object files (build_temp) forces
    # the rebuild when they differ, or when there is no stamp to compare with.

    def _flags_stamp_path(self, ext):
        return os.path.join(self.build_temp, f"{ext.name}.build-flags.json")

    def _flags_stamp(self, ext):
        compiler = self.compiler
        commands = {  # with CC/CFLAGS/LDFLAGS of the environment (customize_compiler)
            attr: getattr(compiler, attr)
            for attr in ("compiler_so", "linker_so", "cc", "linker", "compile_options",
                         "ldflags_shared")
            if getattr(compiler, attr, None) is not None
        }
        return json.dumps({
            "compiler_type": compiler.compiler_type,
            "commands": commands,
            "extra_compile_args": ext.extra_compile_args,
            "extra_link_args": ext.extra_link_args,
            "define_macros": ext.define_macros,
            "undef_macros": ext.undef_macros,
            "include_dirs": ext.include_dirs,
            "libraries": ext.libraries,
            "library_dirs": ext.library_dirs,
            "runtime_library_dirs": ext.runtime_library_dirs,
            "debug": bool(self.debug),
        }, sort_keys=True, indent=1, default=str) + "\n"

    def build_extension(self, ext):
        stamp_path = self._flags_stamp_path(ext)
        stamp = self._flags_stamp(ext)
        try:
            with open(stamp_path, encoding="utf-8") as fh:
                previous = fh.read()
        except OSError:
            previous = None
        old_force = self.force, self.compiler.force
        if previous != stamp:
            if not self.force and os.path.exists(self.get_ext_fullpath(ext.name)):
                print("cakernels: " + ("no record of the flags of the previous build"
                                       if previous is None else
                                       "compiler flags differ from the previous build")
                      + f" ({stamp_path}); rebuilding {ext.name}")
            self.force = self.compiler.force = True
            if os.path.exists(stamp_path):
                os.remove(stamp_path)  # a failed build leaves no stale stamp behind
        try:
            super().build_extension(ext)
        finally:
            self.force, self.compiler.force = old_force
        os.makedirs(os.path.dirname(stamp_path), exist_ok=True)
        with open(stamp_path, "w", encoding="utf-8") as fh:
            fh.write(stamp)


setup(
    ext_modules=[
        Extension(
            "cakernels._native",
            sources=NATIVE_SOURCES,
            include_dirs=["native"],
            depends=NATIVE_HEADERS,
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
