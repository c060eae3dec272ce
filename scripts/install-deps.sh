#!/usr/bin/env bash
# Installs the Debian 12 packages focalscope needs to build, test and run its demo (run as root; idempotent).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-openmp-dev libhdf5-dev libsentencepiece-dev sentencepiece libutf8proc-dev
      nlohmann-json3-dev libgtest-dev libgmock-dev python3 python3-venv python3-dev python3-torch python3-h5py python3-numpy libxml2-utils
      golang-github-bkaradzic-go-lz4-dev golang-github-colinmarc-hdfs-dev wordnet-base python3-sentencepiece
      bible-kjv libcairo2-dev libfreetype-dev fonts-dejavu-core fonts-droid-fallback fonts-symbola  # figures: CJK, emoji
      libimgui-dev libglfw3-dev libgl-dev xvfb xauth libgl1-mesa-dri
      clang-14 libclang-rt-14-dev
      libopenmpi-dev openmpi-bin  # focal batch over MPI (FOCAL_MPI=AUTO builds it when found)
      clang-format-14 clang-tidy-14 libomp-14-dev ccache)  # format / tidy tiers; the TSan tier (libomp + archer)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi
