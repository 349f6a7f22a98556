#!/usr/bin/env bash
# Build bookchat's image with podman, from Debian's packages and PyPI only (no image registry is needed):
#   1. the base: Debian bookworm by debootstrap (minbase, with python3, python3-venv, libgomp1, ca-certificates),
#      imported as localhost/bookchat-base:bookworm; its tarball is kept in var/cache/images/ and reused;
#   2. the wheelhouse: this checkout and every dependency as wheels (build/wheelhouse, `pip wheel` on this machine,
#      which is Python 3.11 on glibc 2.36 like the base);
#   3. the image: deploy/Containerfile, built from a context of only what it copies (build/image-context).
# Usage: deploy/image.sh [TAG]   (default bookchat:latest). Needs root (debootstrap) and podman.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:-bookchat:latest}"
BASE=localhost/bookchat-base:bookworm
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
CACHE=var/cache/images
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$CACHE"

if ! "${PODMAN[@]}" image exists "$BASE"; then
    if [ ! -s "$CACHE/bookworm-base.tar" ]; then
        root="$(mktemp -d)"
        debootstrap --variant=minbase --include=python3,python3-venv,libgomp1,ca-certificates \
            bookworm "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
            || { tail -20 "$CACHE/debootstrap.log"; exit 1; }
        rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
        tar -C "$root" -cf "$CACHE/bookworm-base.tar.partial" . && mv "$CACHE/bookworm-base.tar.partial" "$CACHE/bookworm-base.tar"
        rm -rf "$root"
    fi
    "${PODMAN[@]}" import "$CACHE/bookworm-base.tar" "$BASE" >/dev/null
fi

rm -rf build/wheelhouse build/image-context
.venv/bin/pip wheel --quiet --wheel-dir build/wheelhouse '.[redis]' \
    'async-timeout>=4.0.3'  # redis needs it below Python 3.11.3: the base's is 3.11.2, this machine's may be newer
mkdir -p build/image-context/build
cp -r build/wheelhouse build/image-context/build/wheelhouse
cp -r docs build/image-context/docs
# docker format: OCI images have no HEALTHCHECK, which podman runs from the image config.
"${PODMAN[@]}" build --format docker --network host --build-arg BASE="$BASE" -f deploy/Containerfile -t "$TAG" \
    build/image-context
"${PODMAN[@]}" image inspect "$TAG" --format '{{.Size}}' | awk -v tag="$TAG" '{printf "%s: %.0f MB\n", tag, $1 / 1e6}'
