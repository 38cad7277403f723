#!/usr/bin/env bash
# Installs the Debian packages conveyor builds with — only those that are missing, and runs
# `apt-get update` only when something is missing. Needs root (or sudo) on a fresh machine.
set -euo pipefail
packages=(g++ cmake ninja-build libcaf-dev libcereal-dev liblz4-dev doctest-dev
          libboost-dev libboost-program-options-dev libboost-filesystem-dev
          pybind11-dev python3-dev python3-numpy python3-pytest python3-torch python3-cloudpickle
          python3-venv python3-pip python3-setuptools python3-wheel
          libspdlog-dev prometheus-cpp-dev libcivetweb-dev python3-yaml
          libssl-dev openssl libprotobuf-dev protobuf-compiler zlib1g-dev libcurl4-openssl-dev python3-protobuf
          libturbojpeg0-dev libpng-dev libwebp-dev python3-pil
          clang-format)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
