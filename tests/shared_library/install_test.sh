#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it from outside the build tree, as
# a packager, a C program and a language binding would:
#   - the files land where expected; the library's SONAME; it exports exactly the
#     functions and variables the header declares with SD_API;
#   - consumer.c builds through pkg-config (against the .so, and against the static
#     archive) and through find_package(stable-diffusion);
#   - Python ctypes loads it by name and checks its struct mirrors (ctypes_binding.py).
# usage: install_test.sh BUILD_DIR VERSION [--generate]
#   --generate: through ctypes only, and generate an image from $SD_TEST_SD15_MODEL (an
#   SD 1.x checkpoint; scripts/test.sh makes a random-weight one) with the CLIP vocabulary
#   from $SD_SHARED_DIR/data/clip; skips (77) without them.
set -euo pipefail
build=$1 version=$2 generate=${3-}
here=$(cd "$(dirname "$0")" && pwd)
model=
if [ "$generate" = --generate ]; then
  model=${SD_TEST_SD15_MODEL-}
  export SD_CLIP_VOCAB=${SD_SHARED_DIR-}/data/clip/bpe_simple_vocab_16e6.txt.gz
  if [ ! -f "$model" ] || [ ! -f "$SD_CLIP_VOCAB" ]; then
    echo "skipped: needs SD_TEST_SD15_MODEL (an SD 1.x checkpoint; scripts/test.sh makes one)" \
         "and the CLIP vocabulary in ../shared/data/clip"
    exit 77
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
cd "$work"  # nothing below may find the build tree

lib=$prefix/lib/libstable-diffusion.so
for f in include/stable-diffusion.h lib/libstable-diffusion.so "lib/libstable-diffusion.so.$version" \
         lib/libstable-diffusion.a lib/pkgconfig/stable-diffusion.pc \
         lib/cmake/stable-diffusion/stable-diffusion-config.cmake; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libstable-diffusion.so.${version%%.*}" ] || { echo "FAIL: SONAME '$soname'"; exit 1; }

# Exactly the header's SD_API names leave the library.
declared=$(grep -v '^#' "$prefix/include/stable-diffusion.h" | grep 'SD_API ' |
           sed -E 's/^.*SD_API [^([]*[ *]([A-Za-z_][A-Za-z0-9_]*) *[([].*$/\1/' | sort)
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [ "$declared" != "$exported" ]; then
  echo "FAIL: exported symbols differ from the header's SD_API declarations (< header, > library):"
  diff <(echo "$declared") <(echo "$exported") | grep '^[<>]' | head -40
  exit 1
fi
echo "exports: $(echo "$exported" | wc -l) C API symbols, SONAME $soname"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion stable-diffusion)" = "$version" ] || { echo "FAIL: pkg-config version"; exit 1; }
if [ -z "$model" ]; then
  # shellcheck disable=SC2046  # pkg-config prints several flags
  cc -std=c11 -Wall -Werror "$here/consumer.c" -o consumer_pc $(pkg-config --cflags --libs stable-diffusion) \
     -Wl,-rpath,"$(pkg-config --variable=libdir stable-diffusion)"
  ./consumer_pc 2>/dev/null

  # The static archive: the same program, with the system libraries Libs.private names.
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror "$here/consumer.c" -o consumer_static \
     $(pkg-config --cflags stable-diffusion) -L"$prefix/lib" -l:libstable-diffusion.a \
     $(pkg-config --static --libs stable-diffusion | sed 's/-lstable-diffusion\b//')
  if ldd consumer_static | grep -q libstable-diffusion; then
    echo "FAIL: consumer_static loads the shared library"
    exit 1
  fi
  ./consumer_static 2>/dev/null

  cmake -S "$here/cmake_consumer" -B consumer_cmake -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
        -DCONSUMER_SOURCE="$here/consumer.c" >/dev/null
  cmake --build consumer_cmake >/dev/null
  ./consumer_cmake/consumer 2>/dev/null
fi

# OpenMP's idle threads sleep in a program that loads the library without choosing a wait
# policy (libgomp spins 300000 times by default, which starves a loaded machine); the
# program's environment is left as it was; a policy the user chose stands.
if [ -e "$prefix/lib/libstable-diffusion-omp.so" ]; then
  cat >omp_check.py <<'PY'
import ctypes, sys
ctypes.CDLL(sys.argv[1])  # by its full path: its helper is found beside it
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
print("OMP_WAIT_POLICY in the environment:", libc.getenv(b"OMP_WAIT_POLICY"), flush=True)
ctypes.CDLL("libgomp.so.1").omp_display_env(1)
PY
  chosen=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT /usr/bin/python3 omp_check.py "$lib" 2>&1)
  echo "$chosen" | grep -q "GOMP_SPINCOUNT = '0'" ||
    { echo "FAIL: libgomp still spins when nothing was chosen: $chosen"; exit 1; }
  echo "$chosen" | grep -q "environment: None" ||
    { echo "FAIL: the program's environment was changed: $chosen"; exit 1; }
  active=$(OMP_WAIT_POLICY=active /usr/bin/python3 omp_check.py "$lib" 2>&1)
  if ! echo "$active" | grep -q "environment: b'active'" || echo "$active" | grep -q "SPINCOUNT = '0'"; then
    echo "FAIL: OMP_WAIT_POLICY=active was not kept: $active"
    exit 1
  fi
  echo "OpenMP: passive waiting by default, the user's choice kept"
fi

# Debian's python, as a binding's user would run it; the library found by name.
LD_LIBRARY_PATH=$prefix/lib /usr/bin/python3 "$here/ctypes_binding.py" \
  "$prefix/include/stable-diffusion.h" "$version" ${model:+"$model"}
