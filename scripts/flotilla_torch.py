#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""A flotilla network in PyTorch: builds the nn.Module that a file written by
flotilla::interop::save_safetensors describes (its metadata holds the module tree) and loads the
file's weights into it. Needs PyTorch; nothing else (safetensors files are read and written here).

    import flotilla_torch
    model = flotilla_torch.load("model.safetensors")    # an nn.Module in eval mode
    logits = model(images)                              # images: (N, C, H, W) or (N, features)
    flotilla_torch.save(model, "tuned.safetensors")     # readable by load_safetensors<Net>()

flotilla keeps an image sample channels-last, (H, W, C); PyTorch's modules take (C, H, W).
`from_flotilla_images(x, shape)` turns a batch of flotilla's flat samples into PyTorch's layout.

    python3 scripts/flotilla_torch.py model.safetensors     # prints the module and its tensors
"""
from __future__ import annotations

import json
import struct
import sys

import torch
from torch import nn

_DTYPES = {
    "F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def read_safetensors(path: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors and metadata of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, not a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: the header's length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, d in header.items():
        begin, end = d["data_offsets"]
        dtype = _DTYPES[d["dtype"]]
        t = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=dtype) if end > begin \
            else torch.empty(0, dtype=dtype)
        tensors[name] = t.reshape(d["shape"])
    return tensors, metadata


def write_safetensors(path: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Writes `tensors` (contiguous, little-endian as on every machine PyTorch runs on) to `path`."""
    header: dict = {"__metadata__": dict(metadata)} if metadata else {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class GlobalAvgPool(nn.Module):
    """flotilla's GlobalAvgPool: (N, C, H, W) to (N, C), each channel's mean."""

    def forward(self, x):
        return x.mean(dim=(2, 3))


class Residual(nn.Module):
    """body(x) + shortcut(x)."""

    def __init__(self, body: nn.Module, shortcut: nn.Module):
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x):
        return self.body(x) + self.shortcut(x)


class Branches(nn.Module):
    """flotilla's Add and Concat: the branches' outputs summed, or side by side along dim 1."""

    def __init__(self, branches: list[nn.Module], concat: bool):
        super().__init__()
        for i, b in enumerate(branches):
            self.add_module(str(i), b)
        self.concat = concat

    def forward(self, x):
        outs = [b(x) for b in self.children()]
        if self.concat:
            return torch.cat(outs, dim=1)
        total = outs[0]
        for o in outs[1:]:
            total = total + o
        return total


def build(spec: dict) -> nn.Module:
    """The module a node of "flotilla.modules" describes."""
    t = spec["type"]
    simple = {"ReLU": nn.ReLU, "Tanh": nn.Tanh, "Sigmoid": nn.Sigmoid, "GELU": nn.GELU,
              "Flatten": nn.Flatten, "Identity": nn.Identity, "GlobalAvgPool": GlobalAvgPool}
    if t in simple:
        return simple[t]()
    if t == "Sequential":
        return nn.Sequential(*[build(c) for c in spec["children"]])
    if t == "Linear":
        return nn.Linear(spec["in_features"], spec["out_features"])
    if t == "Conv2d":
        return nn.Conv2d(spec["in_channels"], spec["out_channels"], spec["kernel_size"], stride=spec["stride"],
                         padding=spec["padding"])
    if t == "MaxPool2d":
        return nn.MaxPool2d(spec["kernel_size"], stride=spec["stride"])
    if t == "AvgPool2d":
        return nn.AvgPool2d(spec["kernel_size"], stride=spec["stride"], padding=spec["padding"], count_include_pad=True)
    if t == "LeakyReLU":
        return nn.LeakyReLU(spec["negative_slope"])
    if t == "Dropout":
        return nn.Dropout(spec["p"])
    if t in ("BatchNorm1d", "BatchNorm2d"):
        cls = nn.BatchNorm1d if t == "BatchNorm1d" else nn.BatchNorm2d
        return cls(spec["num_features"], eps=spec["eps"], momentum=spec["momentum"])
    if t == "LayerNorm":
        return nn.LayerNorm(spec["normalized_shape"], eps=spec["eps"])
    if t == "Residual":
        return Residual(build(spec["body"]), build(spec["shortcut"]))
    if t in ("Add", "Concat"):
        return Branches([build(b) for b in spec["branches"]], concat=t == "Concat")
    raise ValueError(f"unknown module type {t!r} in the file's flotilla.modules")


def load(path: str) -> nn.Module:
    """The network `path` describes, with its weights, in eval mode and in the file's dtype."""
    tensors, metadata = read_safetensors(path)
    if "flotilla.modules" not in metadata:
        raise ValueError(f"{path}: no flotilla.modules in the metadata: not written by flotilla::interop::save_safetensors")
    model = build(json.loads(metadata["flotilla.modules"]))
    dtype = next(iter(tensors.values())).dtype if tensors else torch.float32
    model = model.to(dtype)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [m for m in missing if not m.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise ValueError(f"{path}: the tensors do not fit the module tree: missing {missing}, unexpected {unexpected}")
    model.input_shape = json.loads(metadata.get("flotilla.input_shape", "[]"))
    return model.eval()


def save(model: nn.Module, path: str) -> None:
    """The model's state_dict to `path`, as PyTorch holds it (flotilla's load_safetensors reads it)."""
    write_safetensors(path, dict(model.state_dict()), {"format": "pt"})


def from_flotilla_images(x: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """A batch of flotilla's flat samples of an image shape (C, H, W), stored (H, W, C), as (N, C, H, W)."""
    if len(shape) != 3:
        return x.reshape(x.shape[0], *shape)
    c, h, w = shape
    return x.reshape(x.shape[0], h, w, c).permute(0, 3, 1, 2).contiguous()


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    model = load(sys.argv[1])
    print(model)
    for name, t in model.state_dict().items():
        print(f"{name}: {list(t.shape)} {t.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
