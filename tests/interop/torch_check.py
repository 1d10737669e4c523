#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""The PyTorch side of the round trip (torch_roundtrip.sh): for each network NAME in DIR, builds the
module from NAME.safetensors with scripts/flotilla_torch.py, runs it on the inputs of
NAME.io.safetensors, and checks its outputs against flotilla's: softmax probabilities within 1e-5
(the issue's bar), outputs within 1e-4 relative, and the same predicted class wherever flotilla's
top two scores differ by more than that. Then writes the module's state_dict to NAME.torch.safetensors
for flotilla to read back.

    torch_check.py DIR NAME...
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))

import torch  # noqa: E402

import flotilla_torch  # noqa: E402


def check(directory: str, name: str) -> bool:
    model = flotilla_torch.load(os.path.join(directory, name + ".safetensors"))
    io, _ = flotilla_torch.read_safetensors(os.path.join(directory, name + ".io.safetensors"))
    x, y = io["x"], io["y"]
    with torch.no_grad():
        out = model(x)
    if out.shape != y.shape:
        print(f"{name}: PyTorch's outputs are {list(out.shape)}, flotilla's {list(y.shape)}")
        return False
    d_out = (out - y).abs().max().item()
    scale = max(1.0, y.abs().max().item())
    d_p = (torch.softmax(out.double(), 1) - torch.softmax(y.double(), 1)).abs().max().item()
    top2 = y.topk(min(2, y.shape[1]), dim=1).values
    clear = (top2[:, 0] - top2[:, -1]) > 1e-4 * scale
    agree = (out.argmax(1) == y.argmax(1))[clear].all().item()
    ok = d_p <= 1e-5 and d_out <= 1e-4 * scale and agree
    print(f"{name}: {x.shape[0]} samples, max |output difference| {d_out:.3g} (largest output {scale:.3g}), "
          f"max |probability difference| {d_p:.3g}, same class: {agree}: {'ok' if ok else 'FAILED'}")
    flotilla_torch.save(model, os.path.join(directory, name + ".torch.safetensors"))
    return ok


def main() -> int:
    ok = all([check(sys.argv[1], name) for name in sys.argv[2:]])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
