#!/bin/sh
# apt-install.sh PACKAGES [SNAPSHOT]: install distribution packages during a build,
# from a dated snapshot of the archive when SNAPSHOT (e.g. 20261101T000000Z) is set,
# so two builds months apart install the same versions. Needs apt >= 2.7
# (Ubuntu 24.04) for --snapshot. Nothing to install: nothing happens.
set -eu
packages="$1"
snapshot="${2:-}"
[ -n "$packages" ] || exit 0
off=/etc/apt/sources.list.d.lockpipe-off
if [ -n "$snapshot" ]; then
  # Only the distribution's archive keeps dated snapshots; other sources
  # (NVIDIA's CUDA repository in the nvidia/cuda images) are set aside meanwhile.
  mkdir -p "$off"
  find /etc/apt/sources.list.d -maxdepth 1 -type f ! -name ubuntu.sources -exec mv {} "$off/" \;
  apt-get update --snapshot "$snapshot"
else
  apt-get update
fi
# shellcheck disable=SC2086 # a word list by design
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $packages
rm -rf /var/lib/apt/lists/*
if [ -d "$off" ]; then
  find "$off" -maxdepth 1 -type f -exec mv {} /etc/apt/sources.list.d/ \;
  rmdir "$off"
fi
