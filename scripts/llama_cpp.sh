#!/usr/bin/env bash
# llama.cpp compiled once per machine, for both llama-cpp-python (the embedded server's binding) and
# llama.cpp's own `llama-server`: one CMake build tree of the llama.cpp source vendored in the
# llama-cpp-python sdist of the pinned version, kept in $LLAMA_CPP_CACHE. The Makefile runs it:
#
#   scripts/llama_cpp.sh libs VENV     # `make install`: the binding, its shared libraries from the tree
#   scripts/llama_cpp.sh server VENV   # `make llama-server`: the server target of the same tree
#
# `libs` builds only the binding's libraries (libllama, libggml*, libmtmd), so `make run` never waits
# for the server; `server` later compiles only what the server adds (its own sources and llama.cpp's
# `common`). The binding is installed from the same sdist with its own compile switched off
# (llama-cpp-python's LLAMA_BUILD=OFF: its Python code only), and the libraries are copied where its
# wheel would put them (llama_cpp/lib, which llama_cpp loads by default); the server goes to
# VENV/lib/llama-server with a copy of them (their $ORIGIN run path finds each other), linked as
# VENV/bin/llama-server.
#
# Limits: the libraries are built for this machine's CPU (llama.cpp's GGML_NATIVE, as pip's own build
# of the binding), so the cache is per machine, keyed by the version only: `rm -rf` it after a
# compiler upgrade. Two runs at once (two clones) wait for each other on a lock; a build that failed
# leaves the tree, and the next run carries on from where it stopped.
set -euo pipefail
what=${1:?usage: llama_cpp.sh libs|server VENV}
venv=${2:?usage: llama_cpp.sh libs|server VENV}
version=${LLAMA_CPP_PYTHON:?the pinned llama-cpp-python version}
cache=${LLAMA_CPP_CACHE:?the per-machine cache folder}
jobs=${LLAMA_CPP_JOBS:-$(nproc 2>/dev/null || echo 2)}
src=$cache/llama_cpp_python-$version
build=$cache/build
cmake=$(command -v cmake || true)
if [ -z "$cmake" ]; then
  # No system CMake (a machine without root): the PyPI one, as pip's own build of the binding would take.
  "$venv/bin/pip" install --quiet cmake
  cmake=$venv/bin/cmake
fi
command -v c++ >/dev/null || { echo "error: compiling llama.cpp needs a C++ compiler (g++)" >&2; exit 1; }
mkdir -p "$cache"
exec 9>"$cache.lock"
flock -n 9 || { echo "waiting for another build of $cache to finish"; flock 9; }

if [ ! -f "$src/.complete" ]; then
  echo "Fetching llama-cpp-python $version's source (llama.cpp vendored)..."
  rm -rf "$src" "$cache/sdist"
  "$venv/bin/pip" download --quiet --no-binary :all: --no-deps -d "$cache/sdist" "llama-cpp-python==$version"
  tar -xzf "$cache/sdist/llama_cpp_python-$version.tar.gz" -C "$cache"
  rm -rf "$cache/sdist"
  touch "$src/.complete"
fi

compile() {
  if [ ! -f "$build/.configured" ]; then
    # Shared libraries, as the binding loads them; $ORIGIN: they and the server find each other
    # wherever they are copied together. Tools on for the server's target, built only when asked.
    nice -n 10 "$cmake" -S "$src/vendor/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_SERVER=ON >"$cache/configure.log" 2>&1 || { tail -30 "$cache/configure.log"; exit 1; }
    touch "$build/.configured"
  fi
  nice -n 10 "$cmake" --build "$build" --target "$@" -j "$jobs" >"$cache/build-$1.log" 2>&1 \
    || { tail -30 "$cache/build-$1.log"; exit 1; }
}

libs="libggml-base.so libggml-cpu.so libggml.so libllama.so libmtmd.so"
# The libraries (and the server) copied into `dest`, each whole or not at all.
copy() {
  local dest=$1 f
  shift
  mkdir -p "$dest"
  for f in "$@"; do cp "$build/bin/$f" "$dest/$f.tmp" && mv "$dest/$f.tmp" "$dest/$f"; done
}
case $what in
  libs)
    [ -f "$build/bin/libllama.so" ] || echo "Compiling llama.cpp for llama-cpp-python $version (once per machine: a few minutes)..."
    compile llama mtmd
    # The binding's Python-only wheel, built once per machine and Python beside the build (never in
    # pip's cache, where it would stand for the full wheel): a fresh venv installs it in seconds.
    wheels=$cache/wheels-$("$venv/bin/python" -c 'import sys; print(sys.implementation.cache_tag)')
    if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
      rm -rf "$wheels.tmp"
      CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" "$venv/bin/pip" wheel --quiet --no-cache-dir --no-deps \
        -w "$wheels.tmp" "$src"
      rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
    fi
    wheel=$(ls "$wheels"/llama_cpp_python-"$version"-*.whl)
    "$venv/bin/pip" install --quiet "$wheel[server]"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    # shellcheck disable=SC2086
    copy "$site/llama_cpp/lib" $libs
    "$venv/bin/python" -c 'import llama_cpp; llama_cpp.llama_backend_init()'
    ;;
  server)
    [ -f "$build/bin/llama-server" ] || echo "Compiling llama-server from the same llama.cpp build (its own sources only)..."
    compile llama-server
    # Its own copy of the libraries beside it (a few MB), whatever built the binding's.
    # shellcheck disable=SC2086
    copy "$venv/lib/llama-server" llama-server $libs
    ln -sfn "../lib/llama-server/llama-server" "$venv/bin/llama-server"
    "$venv/bin/llama-server" --version >/dev/null 2>&1 \
      || { "$venv/bin/llama-server" --version; echo "error: $venv/bin/llama-server does not run" >&2; exit 1; }
    ;;
  *)
    echo "usage: llama_cpp.sh libs|server VENV" >&2
    exit 2
    ;;
esac
