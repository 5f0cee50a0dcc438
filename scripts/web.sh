#!/usr/bin/env bash
# scripts/web.sh — build TTT Lab for the browser (WebAssembly + WebGL2) and serve it.
#
#   bash scripts/web.sh                 set up, build build-web/site/, serve it on http://127.0.0.1:8080/
#   bash scripts/web.sh --port 9000     another port
#   bash scripts/web.sh --build-only    set up and build, do not serve
#   bash scripts/web.sh --test          build, then drive the site in headless Chromium (web/test/)
#   bash scripts/web.sh --bench         build, then time the engine in the browser against build/tttlab
#
# Steps, each skipped when already done:
#   1. apt-get install emscripten (3.1.6) and chromium when missing (as root, or a user who may sudo);
#   2. build-web/deps/: the sources of Debian's imgui, md4c and muparser packages (the versions the
#      desktop build links), downloaded from deb.debian.org and checked against the sha256 of their
#      .dsc files, pinned below; a copy of Eigen with two lines changed (see patch_eigen);
#   3. configure (emcmake) and build the tttlab_web target into build-web/site/.
# The site is static files: index.html, tttlab.{js,wasm,worker.js,data} and sw.js. Threads need the
# page to be cross-origin isolated: web/serve.py sends the two headers that make it so. On a host that
# cannot set headers (GitHub Pages, a plain bucket), web/sw.js adds them; docs/WEB.md says how.
# Environment: TTTLAB_SKIP_APT=1 (do not install packages), TTTLAB_WEB_JOBS (build jobs; default nproc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
  printf 'web: %s\n' "$*" >&2
  exit 1
}
step() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }

mode=serve
port=8080
while (($#)); do
  case $1 in
    --port) port=${2:?--port needs a number}; shift ;;
    --build-only) mode=build ;;
    --test) mode=test ;;
    --bench) mode=bench ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done
[[ "$port" =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "--port needs a port number, 1 .. 65535"

WEB=build-web
DEPS=$WEB/deps
start=$SECONDS

# ---- 1. packages -------------------------------------------------------------------------------------
step "1/3 packages (emscripten, chromium)"
PACKAGES=(emscripten chromium xz-utils curl ca-certificates python3
  libeigen3-dev nlohmann-json3-dev libstb-dev fonts-dejavu-core)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
if ((${#missing[@]} == 0)); then
  note "installed"
elif [[ "${TTTLAB_SKIP_APT:-0}" == 1 ]]; then
  die "missing: ${missing[*]} (TTTLAB_SKIP_APT=1, so not installing them)"
else
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "missing: ${missing[*]}; run as root to install them"
    sudo=(sudo)
  fi
  note "installing: ${missing[*]}"
  apt_log=$(mktemp)
  # --no-install-recommends: emscripten's recommendations would pull in systemd and more.
  if ! { DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
    >"$apt_log" 2>&1; then
    cat "$apt_log"
    die "apt-get could not install: ${missing[*]}"
  fi
  rm -f "$apt_log"
fi
# The machines' Node.js may not be Debian's, and then it does not search Debian's module folder, where
# emscripten's JavaScript optimiser finds acorn.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
emcc_version=$(emcc --version 2>/dev/null | sed -n '1s/.* \([0-9][0-9.]*\) .*/\1/p')
[[ -n "$emcc_version" ]] || die "emcc does not run (apt-get install emscripten)"
note "emcc $emcc_version, $(node --version 2>/dev/null || echo 'no node'), $(chromium --version 2>/dev/null || echo 'no chromium')"

# ---- 2. third-party sources --------------------------------------------------------------------------
step "2/3 third-party sources ($DEPS)"
# name version dsc-sha256: the source packages of Debian 12's libimgui-dev, libmd4c-dev, libmuparser-dev.
SOURCES=(
  "imgui 1.86+ds-1 a8023a69501688316566ecd615fe98ecc53b11d305205a6636593f7066bdb7c3"
  "md4c 0.4.8-1 450fc8a9b29e7c7f525de50183ae2109d43b35f4232999ab4385ca98d173beb4"
  "muparser 2.3.3-0.1 0b8d22598a263d54671e854ff2558e6b37df96b15045d3c58316904ddecba299"
)
MIRROR=${TTTLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$DEPS/src" "$DEPS/download" "$DEPS/include"
fetch() {  # url file
  curl -fsSL --retry 3 -o "$2.part" "$1" || { rm -f "$2.part"; die "could not download $1"; }
  mv "$2.part" "$2"
}
for entry in "${SOURCES[@]}"; do
  read -r name version pin <<<"$entry"
  [[ -f "$DEPS/src/$name/.tttlab-version" && "$(cat "$DEPS/src/$name/.tttlab-version")" == "$version" ]] && {
    note "$name $version: present"
    continue
  }
  dsc=${name}_${version}.dsc
  first=${name:0:1}
  fetch "$MIRROR/pool/main/$first/$name/$dsc" "$DEPS/download/$dsc"
  got=$(sha256sum "$DEPS/download/$dsc" | cut -d' ' -f1)
  if [[ "$got" != "$pin" ]]; then
    rm -f "$DEPS/download/$dsc"
    die "$dsc does not match its pinned sha256 (got $got)"
  fi
  # The .dsc (pinned above) gives the sha256 of the upstream tarball. Only that tarball is used: the
  # packages' Debian parts carry packaging alone (imgui's one patch adds a Makefile), and the mirror
  # does not always keep them.
  read -r sum _ orig < <(sed -n '/^Checksums-Sha256:/,/^[A-Z]/{/^ .*\.orig\.tar\./p}' "$DEPS/download/$dsc")
  [[ -n "${orig:-}" ]] || die "$dsc names no upstream tarball"
  if [[ ! -f "$DEPS/download/$orig" || "$(sha256sum "$DEPS/download/$orig" | cut -d' ' -f1)" != "$sum" ]]; then
    fetch "$MIRROR/pool/main/$first/$name/$orig" "$DEPS/download/$orig"
    [[ "$(sha256sum "$DEPS/download/$orig" | cut -d' ' -f1)" == "$sum" ]] ||
      { rm -f "$DEPS/download/$orig"; die "$orig does not match the sha256 in $dsc"; }
  fi
  rm -rf "$DEPS/src/$name" "$DEPS/src/$name.tmp"
  mkdir -p "$DEPS/src/$name.tmp"
  tar -xf "$DEPS/download/$orig" -C "$DEPS/src/$name.tmp" --strip-components=1 ||
    die "could not unpack $orig"
  printf '%s\n' "$version" >"$DEPS/src/$name.tmp/.tttlab-version"
  mv "$DEPS/src/$name.tmp" "$DEPS/src/$name"
  note "$name $version: unpacked $orig (sha256 checked against $dsc)"
done

# Eigen's SSE kernels run on emscripten's SSE-to-WebAssembly-SIMD headers once two of its inline-asm
# workarounds for old GCC are kept away from emscripten's clang (it claims to be GCC 4.2, and its
# wasm backend has no x86 registers for the asm). Debian's headers stay as shipped: this is a copy.
patch_eigen() {
  local dst=$DEPS/eigen3.tmp
  rm -rf "$dst" && cp -r /usr/include/eigen3 "$dst"
  sed -i 's/^#if EIGEN_COMP_GNUC && EIGEN_COMP_GNUC < 63$/& \&\& !defined(__EMSCRIPTEN__)/' \
    "$dst/Eigen/src/Core/arch/SSE/PacketMath.h"
  sed -i 's/#if EIGEN_GNUC_AT_LEAST(6,0) && defined(EIGEN_VECTORIZE_SSE)$/& \&\& !defined(__EMSCRIPTEN__)/' \
    "$dst/Eigen/src/Core/products/GeneralBlockPanelKernel.h"
  grep -q '63 && !defined(__EMSCRIPTEN__)' "$dst/Eigen/src/Core/arch/SSE/PacketMath.h" &&
    grep -q 'EIGEN_VECTORIZE_SSE) && !defined(__EMSCRIPTEN__)' "$dst/Eigen/src/Core/products/GeneralBlockPanelKernel.h" ||
    die "this Eigen ($(sed -n 's/^#define EIGEN_[A-Z]*_VERSION *//p' /usr/include/eigen3/Eigen/src/Core/util/Macros.h | paste -sd.)) does not have the two lines the browser build changes"
  rm -rf "$DEPS/eigen3" && mv "$dst" "$DEPS/eigen3"
}
[[ -d /usr/include/eigen3/Eigen ]] || die "Eigen is missing (bash scripts/setup.sh installs libeigen3-dev)"
if [[ ! -f $DEPS/eigen3/Eigen/Core || /usr/include/eigen3/Eigen/Core -nt $DEPS/eigen3/Eigen/Core ]]; then
  patch_eigen
  note "eigen3: copied from /usr/include/eigen3, SSE inline asm kept from emscripten"
else
  note "eigen3: present"
fi
# Header-only libraries, each alone in include/, so that /usr/include itself (glibc's headers) is
# never on the browser build's search path.
for link in nlohmann:/usr/include/nlohmann stb_image_write.h:/usr/include/stb/stb_image_write.h; do
  [[ -e ${link#*:} ]] || die "${link#*:} is missing (bash scripts/setup.sh installs it)"
  ln -sfn "${link#*:}" "$DEPS/include/${link%%:*}"
done

# The corpus the page packs. The validation split whole (294 KB), so that a model's validation loss in
# the tab is the desktop's; of the training split (5.4 MB), 1.5 MB: eight stretches taken evenly across
# it, cut at paragraph breaks, so every genre of the corpus is in it. A tiny model in the tab trains a
# few hundred steps of at most 16 × 256 bytes, about 1.5 MB, so it sees little text twice; the page
# downloads 4 MB less (about 1.4 MB compressed) before its first frame.
if [[ ! -f data/brown/train.txt || ! -f data/brown/val.txt ]]; then
  note "data/brown is not prepared: running scripts/setup.sh first (packages, corpus, the desktop build)"
  bash scripts/setup.sh
fi
if [[ ! -f $DEPS/brown/train.txt || data/brown/train.txt -nt $DEPS/brown/train.txt ]]; then
  mkdir -p "$DEPS/brown"
  python3 - data/brown "$DEPS/brown" <<'PY'
import os, sys
src, dst = sys.argv[1], sys.argv[2]
train = open(os.path.join(src, "train.txt"), "rb").read()
pieces, budget = 8, 1_500_000
out = []
for i in range(pieces):
    start = len(train) * i // pieces
    if i:
        start = train.find(b"\n\n", start) + 2
    end = train.find(b"\n\n", start + budget // pieces)
    out.append(train[start:end if end > 0 else len(train)])
open(os.path.join(dst, "train.txt.tmp"), "wb").write(b"\n\n".join(out) + b"\n")
os.replace(os.path.join(dst, "train.txt.tmp"), os.path.join(dst, "train.txt"))
PY
  cp data/brown/val.txt "$DEPS/brown/val.txt"
  note "brown: $(wc -c <"$DEPS/brown/train.txt") bytes of training text, the validation split whole"
fi

# ---- 3. build ---------------------------------------------------------------------------------------
step "3/3 build ($WEB/, target tttlab_web)"
jobs=${TTTLAB_WEB_JOBS:-$(nproc 2>/dev/null || echo 2)}
if [[ ! -f $WEB/build.ninja ]]; then
  # Release is -O3: the engine check ran 1.1 to 1.8 times slower in the browser at -O2 (scripts/web.sh
  # --bench), for a build that is only a few minutes quicker.
  emcmake cmake -S . -B "$WEB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTTTLAB_WEB_DEPS="$PWD/$DEPS" \
    -DTTTLAB_CUDA=OFF -DTTTLAB_NATIVE=OFF -DTTTLAB_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON \
    ${TTTLAB_WEB_CMAKE_ARGS:-} >"$WEB/configure.log" 2>&1 || { cat "$WEB/configure.log"; die "configure failed"; }
fi
cmake --build "$WEB" --target tttlab_web -j "$jobs" || die "the browser build failed"
note "site: $WEB/site/ ($(du -sh "$WEB/site" | cut -f1); set up and built in $((SECONDS - start)) s)"

# ---- test, benchmark or serve --------------------------------------------------------------------------
native_check() {  # repeats: the engine check natively, on the files the page packs
  [[ -x build/tttlab_web_check && -x build/tttlab ]] || {
    note "building build/tttlab and build/tttlab_web_check (the native side of the comparison)"
    [[ -f build/build.ninja ]] || bash scripts/setup.sh
    cmake --build build --target tttlab tttlab_web_check >/dev/null || die "the native build failed"
  }
  mkdir -p "$WEB/test"
  build/tttlab_web_check --model assets/models/tiny-brown --brown "$DEPS/brown" --repeats "$1" \
    >"$WEB/test/native.json" || die "the native engine check failed"
}
run_browser() {  # extra arguments for browser_test.mjs
  local node_flags=()
  # Node 20 has WebSocket behind a flag; newer Node has it on.
  node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null || node_flags=(--experimental-websocket)
  node "${node_flags[@]}" web/test/browser_test.mjs --site "$WEB/site" --out "$WEB/test" --native "$WEB/test/native.json" "$@"
}
case $mode in
  build) ;;
  test)
    step "browser test (headless Chromium)"
    native_check 1
    build/tttlab gui --list-panels >"$WEB/test/panels.txt" || die "build/tttlab gui --list-panels failed"
    run_browser --panels "$WEB/test/panels.txt" || die "the browser test failed (screenshots and results: $WEB/test/)"
    ;;
  bench)
    step "web benchmark: the engine in the browser against the native build, same machine"
    repeats=${TTTLAB_WEB_BENCH_REPEATS:-5}
    native_check "$repeats"
    run_browser --bench --repeats "$repeats" || die "the browser benchmark failed"
    python3 web/test/bench_report.py "$WEB/test/results.json"
    ;;
  serve)
    step "serving"
    exec python3 web/serve.py --dir "$WEB/site" --port "$port"
    ;;
esac
