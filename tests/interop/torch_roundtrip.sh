#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# flotilla -> safetensors -> PyTorch -> safetensors -> flotilla, for the networks of nets.hpp.
# Exit 77 (skipped) where PyTorch is not importable by PYTHON.
#
#   torch_roundtrip.sh PYTHON PROGRAM
set -euo pipefail
python=$1
program=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "torch_roundtrip: PyTorch is not importable by $python: skipped (Debian: apt install python3-torch)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$program" write "$dir"
"$python" "$here/torch_check.py" "$dir" mlp cnn resnet zoo
"$program" check "$dir"
