#!/usr/bin/env bash
# Installs every system package the project needs (Debian 12). Idempotent: does nothing
# when all packages are present, so every entry point can call it.
set -euo pipefail
PACKAGES=(
  cmake ninja-build ccache g++ git
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev libffi-dev libncurses-dev
  libgtest-dev python3 python3-numpy python3-torch nlohmann-json3-dev libfmt-dev libtorch-dev
  clang-19 libclang-rt-19-dev
  pkg-config libhdf5-dev libnifti2-dev libblosc-dev liblz4-dev libpng-dev libcairo2-dev fonts-dejavu-core
  python3-h5py python3-nibabel python3-zarr python3-scipy
  libonnx-dev libprotobuf-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
