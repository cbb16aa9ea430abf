#!/bin/bash
# Builds a minimal Debian bookworm base image from Debian's own packages, for machines that reach Debian's
# archive but no image registry (no Docker Hub): debootstrap -> tarball -> `docker import`.
#
#   scripts/base_image.sh [--force]        # -> image captions-base:bookworm (about 1-3 min)
#   PYTHON_PREFIX=/root/.pyenv/versions/3.11.7 BASE_IMAGE=captions-base:bookworm-py3.11.7 scripts/base_image.sh
#
# The image has Python 3.11 with venv, ca-certificates and `python` in /usr/local/bin, so the project's
# Dockerfile builds on it with `--build-arg PYTHON_IMAGE=captions-base:bookworm`. By default that Python is
# Debian's /usr/bin/python3.11 (python3-venv). Debian's is 3.11.2, whose tarfile lacks the extraction filters
# (PEP 706, 3.11.4) that NeMo 3.0.0 uses to unpack a .nemo file: the server then cannot load its model. So
# PYTHON_PREFIX may name a CPython 3.11 built on this Debian release (e.g. pyenv's), which is copied to
# /usr/local (its standard library without site-packages and tests) as in the official python image. The host's CA
# bundle (/etc/ssl/certs/ca-certificates.crt, which may hold a local proxy's CA) and a pip.conf pointing pip
# at it are copied in, so that `pip install` from PyPI works inside the build on this machine. The image is
# local only: never push it (it carries this machine's CA bundle).
# Idempotent: an existing image is kept unless --force; the tarball is cached under build/base-image/.
set -euo pipefail

IMAGE=${BASE_IMAGE:-captions-base:bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/build/base-image
TARBALL=$WORK/$SUITE-minbase.tar
PYTHON_PREFIX=${PYTHON_PREFIX:-}
if [ -z "$PYTHON_PREFIX" ]; then
    PACKAGES=python3.11,python3.11-venv,python3-venv,ca-certificates,libsndfile1
else
    # The shared libraries a CPython build links to (as in the official python image), not Debian's Python.
    PACKAGES=ca-certificates,libsndfile1,libssl3,libffi8,libsqlite3-0,liblzma5,libbz2-1.0,zlib1g,libreadline8
    PACKAGES=$PACKAGES,libuuid1,libncursesw6,libexpat1,libnsl2,libtirpc3,libcrypt1
    [ -x "$PYTHON_PREFIX/bin/python3.11" ] || { echo "no $PYTHON_PREFIX/bin/python3.11" >&2; exit 1; }
    TARBALL=$WORK/$SUITE-minbase-python$("$PYTHON_PREFIX/bin/python3.11" -c 'import platform; print(platform.python_version())').tar
fi

force=false
[ "${1:-}" = "--force" ] && force=true

if ! $force && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "kept     image $IMAGE (scripts/base_image.sh --force rebuilds it)"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "needs debootstrap: apt-get install -y debootstrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }

remove_rootfs() {
    # An interrupted debootstrap may leave /proc or /sys mounted inside: unmount, never cross into them.
    awk -v r="$1/" 'index($2 "/", r) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m"
    done
    rm -rf --one-file-system "$1"
}

mkdir -p "$WORK"
if $force || [ ! -s "$TARBALL" ]; then
    rootfs=$WORK/rootfs
    remove_rootfs "$rootfs"
    start=$SECONDS
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$MIRROR"
    # apt inside the image: the same suites as the official images, without caches or docs.
    cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb ${MIRROR%/debian}/debian-security $SUITE-security main
SOURCES
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
        > "$rootfs/etc/apt/apt.conf.d/90captions-no-recommends"
    if [ -z "$PYTHON_PREFIX" ]; then
        ln -sf /usr/bin/python3.11 "$rootfs/usr/local/bin/python"
        ln -sf /usr/bin/python3.11 "$rootfs/usr/local/bin/python3"
    else
        # The interpreter finds its standard library next to itself (lib/python3.11/os.py) and libpython
        # through ld.so's cache once its build-time RUNPATH is absent.
        tar -C "$PYTHON_PREFIX" -c --exclude='lib/python3.11/site-packages/*' --exclude='lib/python3.11/test' \
            --exclude='lib/python3.11/idlelib' --exclude='lib/python3.11/tkinter' \
            --exclude='lib/python3.11/turtledemo' --exclude='*/_tkinter*' --exclude='__pycache__' \
            bin/python3.11 lib/python3.11 include/python3.11 $(cd "$PYTHON_PREFIX" && ls -d lib/libpython3.11.so* 2>/dev/null) \
            | tar -C "$rootfs/usr/local" -x
        ln -sf python3.11 "$rootfs/usr/local/bin/python3"
        ln -sf python3.11 "$rootfs/usr/local/bin/python"
        chroot "$rootfs" /sbin/ldconfig
        chroot "$rootfs" /usr/local/bin/python3.11 -c 'import ssl, sqlite3, lzma, bz2, ctypes, venv, tarfile
assert "filter" in tarfile.TarFile.extract.__code__.co_varnames'
    fi
    if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
        cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
        printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$rootfs/etc/pip.conf"
    fi
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    tar --numeric-owner -C "$rootfs" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    remove_rootfs "$rootfs"
    echo "debootstrap + tarball: $((SECONDS - start)) s, $(du -h "$TARBALL" | cut -f1)"
fi
docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$TARBALL" "$IMAGE"
docker image ls "$IMAGE"
