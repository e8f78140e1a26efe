#!/usr/bin/env bash
# Installs what building and testing ZeroBubble MLIR needs and is missing:
# Debian packages through apt-get, Python packages through pip. Quiet and
# quick when everything is already there.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build g++ libgtest-dev libbenchmark-dev
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  openmpi-bin libopenmpi-dev libopenblas-dev pkg-config coinor-libcbc-dev
)
PY_PACKAGES=(numpy pytest matplotlib)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]})); then
  echo "install-deps: installing Debian packages: ${missing[*]}"
  SUDO=
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || {
      echo "install-deps: error: not root and no sudo; install: ${missing[*]}" >&2
      exit 1
    }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PYTHON=${PYTHON:-python3}
py_missing=()
for spec in "${PY_PACKAGES[@]}"; do
  module=${spec%%[=<>]*}
  "$PYTHON" -c "import ${module}" 2>/dev/null || py_missing+=("$spec")
done
if ((${#py_missing[@]})); then
  echo "install-deps: installing Python packages: ${py_missing[*]}"
  "$PYTHON" -m pip install -q "${py_missing[@]}"
fi

# PyTorch, for the Python package's frontend tests (test/python). The
# default Linux wheel pulls ~2.8 GB of CUDA wheels that CPU use only needs in
# order to load; where the CUDA toolkit is installed (/usr/local/cuda) it
# provides most of them and pip supplies the few it lacks. Anything else
# falls back to the full install.
TORCH=torch==2.15.0
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "install-deps: installing $TORCH"
  if [[ -d /usr/local/cuda ]]; then
    "$PYTHON" -m pip install -q --no-deps "$TORCH"
    "$PYTHON" -m pip install -q filelock "typing-extensions>=4.13" sympy \
      networkx jinja2 fsspec nvidia-cusparselt-cu13==0.8.1 \
      nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7 \
      "cuda-toolkit[cufile]==13.2.2" || true
  fi
  "$PYTHON" -c "import torch" 2>/dev/null || "$PYTHON" -m pip install -q "$TORCH"
fi

# Hugging Face transformers and torchvision, for the real-model frontend
# tests (test/python/test_real_models.py). torchvision's wheel pins torch
# loosely; --no-deps keeps the torch installed above.
TORCHVISION=torchvision==0.29.2
TRANSFORMERS=transformers==5.23.0
if ! "$PYTHON" -c "import torchvision" 2>/dev/null; then
  echo "install-deps: installing $TORCHVISION"
  "$PYTHON" -m pip install -q --no-deps "$TORCHVISION"
  "$PYTHON" -m pip install -q pillow
fi
if ! "$PYTHON" -c "import transformers" 2>/dev/null; then
  echo "install-deps: installing $TRANSFORMERS"
  "$PYTHON" -m pip install -q "$TRANSFORMERS"
fi
