#!/usr/bin/env bash
# Build bookchat's image with podman, from Debian's packages and PyPI only (no image registry is needed):
#   1. the base: Debian bookworm by debootstrap (minbase, with python3, python3-venv, libgomp1, ca-certificates),
#      imported as localhost/bookchat-base:bookworm; its tarball is kept in BOOKCHAT_IMAGE_CACHE (default
#      ~/.cache/bookchat/images, outside the checkout: every clone on the machine reuses it);
#   2. the wheelhouse: this checkout and every dependency as wheels (build/wheelhouse, `pip wheel` on this machine,
#      which is Python 3.11 on glibc 2.36 like the base);
#   3. the image: deploy/Containerfile, built from a context of only what it copies (build/image-context).
# With --services it also builds what compose.yaml and `make deploy-test` run beside it where no registry is
# reachable: PostgreSQL 17 with pgvector and Redis from Debian trixie's packages (deploy/services/), on a trixie
# base by debootstrap imported as localhost/debian:trixie-slim (tarball cached the same way).
# Usage: deploy/image.sh [--services] [TAG]   (default bookchat:latest). Needs root (debootstrap) and podman.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVICES=""
if [ "${1:-}" = "--services" ]; then SERVICES=1; shift; fi
TAG="${1:-bookchat:latest}"
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
CACHE="${BOOKCHAT_IMAGE_CACHE:-${HOME:-/root}/.cache/bookchat/images}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$CACHE"

# base IMAGE SUITE [PACKAGES]: a minimal Debian root made by debootstrap, imported as IMAGE.
base() {
    local image="$1" suite="$2" include="${3:-}" tarball="$CACHE/$2-base.tar"
    "${PODMAN[@]}" image exists "$image" && return
    if [ ! -s "$tarball" ]; then
        local root
        root="$(mktemp -d)"
        debootstrap --variant=minbase ${include:+--include="$include"} "$suite" "$root" "$MIRROR" \
            >"$CACHE/debootstrap-$suite.log" 2>&1 || { tail -20 "$CACHE/debootstrap-$suite.log"; exit 1; }
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        tar -C "$root" -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
        rm -rf "$root"
    fi
    "${PODMAN[@]}" import "$tarball" "$image" >/dev/null
}

size() {
    "${PODMAN[@]}" image inspect "$1" --format '{{.Size}}' | awk -v tag="$1" '{printf "%s: %.0f MB\n", tag, $1 / 1e6}'
}

# The wheels are built by the checkout's .venv for the base's Python, 3.11: a .venv of another Python (make picks
# the newest it finds) would build wheels the image can't install.
if ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    echo "deploy/image.sh: the image runs Python 3.11 (Debian bookworm's), and this checkout's .venv is" \
        "$(.venv/bin/python -V 2>&1 || echo missing): make clean && make image PYTHON=python3.11" >&2
    exit 1
fi
BASE=localhost/bookchat-base:bookworm
base "$BASE" bookworm python3,python3-venv,libgomp1,ca-certificates
rm -rf build/wheelhouse build/image-context
.venv/bin/python -m bookchat.base.catalogues --force  # the .mo files the wheel carries (generated, not in git)
.venv/bin/pip wheel --quiet --wheel-dir build/wheelhouse '.[redis]' \
    'async-timeout>=4.0.3'  # redis needs it below Python 3.11.3: the base's is 3.11.2, this machine's may be newer
mkdir -p build/image-context/build
cp -r build/wheelhouse build/image-context/build/wheelhouse
cp -r docs build/image-context/docs
# docker format: OCI images have no HEALTHCHECK, which podman runs from the image config.
"${PODMAN[@]}" build --quiet --format docker --network host --build-arg BASE="$BASE" -f deploy/Containerfile \
    -t "$TAG" build/image-context >/dev/null
size "$TAG"

if [ -n "$SERVICES" ]; then
    base localhost/debian:trixie-slim trixie
    for service in postgres redis; do
        "${PODMAN[@]}" build --quiet --format docker --network host -f "deploy/services/Containerfile.$service" \
            -t "localhost/bookchat-$service:latest" deploy/services >/dev/null
        size "localhost/bookchat-$service:latest"
    done
fi
