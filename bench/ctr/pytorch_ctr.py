#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""The PyTorch side of the click-through training benchmark: the same model as flotilla's sparse
trainer, trained on the same Criteo-format file, timed the same way.

    /usr/bin/python3 bench/ctr/pytorch_ctr.py --train train.txt --test test.txt \
        [--dim 16] [--table-size 262144 | 0] [--hidden 64,32 | none] [--batch 512] [--epochs 1] \
        [--lr 0.05] [--tower-optimizer adagrad|adam] [--tower-lr X] [--threads 1] [--max-lines N] \
        [--row-init normal:0.01 | uniform:0.05] [--tower-init torch | glorot] [--phases]
    /usr/bin/python3 bench/ctr/pytorch_ctr.py --self-test     # parser and metrics, without torch

Files come from flotilla-ctr-generate (docs/ctr_generator.md) or are Criteo's own: label, 13
integer features, 26 hex IDs, tab-separated, any column may be empty.

The model:
* every categorical field's ID is hashed into its own range of `--table-size` rows of one table,
  nn.EmbeddingBag(26 * table_size, dim, mode='sum', sparse=True): row = f * table_size +
  hash(id) mod table_size; each (sample, field) is one bag, an empty field an empty bag (zeros).
  With --table-size 0 there is no hashing: every distinct (field, ID) of the training and the
  held-out file gets a row of its own (per-field index maps, filled while parsing), as in
  flotilla's Embedding without buckets; a held-out ID never trained keeps its initial row there
  as it does on flotilla's servers, which create a row on first touch;
* --row-init: the rows' initial values, normal with that standard deviation or uniform in
  [-scale, scale] (flotilla's CtrModel::init_scale, 0.05); --tower-init glorot: Glorot-uniform
  weights and zero biases, as flotilla's Dense (torch: PyTorch's default for nn.Linear);
* the 13 dense features are log(1 + max(x, 0)), 0 when empty (the Criteo reader's default);
* the 26 * dim embedding values and the 13 dense ones are concatenated and go through the tower:
  Linear+ReLU layers of --hidden widths, then a Linear to one logit (--hidden none: a linear
  model on the concatenation);
* BCEWithLogitsLoss; torch.optim.Adagrad on the table (sparse gradients), Adagrad or Adam on the
  tower.

The files are parsed into tensors before the clock starts: train_seconds covers only the training
steps (forming each batch's bags from the preloaded tensors, forward, backward, both optimizer
steps). The held-out file is then scored, and one line is printed:

    RESULT {"samples_per_s": ..., "auc": ..., "log_loss": ..., "train_seconds": ...}

AUC gives ties half credit; the log loss clamps probabilities to [1e-7, 1 - 1e-7], as
flotilla::binary_metrics does, so the two sides' numbers compare directly.

Debian's python3-torch computes the tower's matrix products with the reference BLAS unless an
optimised one (libopenblas0-openmp) is installed and selected with update-alternatives; the
embedding table's work does not go through BLAS.
"""

import argparse
import array
import json
import math
import os
import sys
import time

DENSE = 13
FIELDS = 26
LOG_LOSS_CLAMP = 1e-7


# ---- parsing ------------------------------------------------------------------------------------

def hashed_row(raw_id, table_size):
    """The row of an ID within its field's range: a multiplicative hash, so that IDs that differ
    only in high bits (or are small integers, as in other click logs) still spread over the rows."""
    return ((raw_id * 0x9E3779B1) & 0xFFFFFFFF) % table_size


class IndexMaps:
    """Per field, raw ID -> a row of one table, numbered in order of first appearance across every
    field and every file read with the same maps: a row per distinct (field, ID), no collisions."""

    def __init__(self):
        self.fields = [dict() for _ in range(FIELDS)]
        self.rows = 0

    def row(self, field, raw_id):
        m = self.fields[field]
        r = m.get(raw_id)
        if r is None:
            r = m[raw_id] = self.rows
            self.rows += 1
        return r


def parse_line(line, number, name, table_size, maps=None):
    """(label, dense[13], rows[26]) of one line; a row is -1 where the field is empty. With `maps`
    (an IndexMaps), rows come from it and table_size is not used."""
    cols = line.rstrip("\r\n").split("\t")
    if len(cols) != 1 + DENSE + FIELDS:
        raise ValueError(f"{name}:{number}: {len(cols)} tab-separated columns, the Criteo format has {1 + DENSE + FIELDS}")
    label = cols[0]
    if label not in ("0", "1"):
        raise ValueError(f"{name}:{number}: column 1: label '{label}' is neither 0 nor 1")
    dense = []
    for j in range(DENSE):
        text = cols[1 + j]
        if text == "":
            dense.append(0.0)
            continue
        try:
            x = int(text)
        except ValueError:
            raise ValueError(f"{name}:{number}: column {2 + j}: '{text}' is not an integer") from None
        dense.append(math.log1p(x) if x > 0 else 0.0)
    rows = []
    for f in range(FIELDS):
        text = cols[1 + DENSE + f]
        if text == "":
            rows.append(-1)
            continue
        try:
            raw = int(text, 16)
        except ValueError:
            raise ValueError(f"{name}:{number}: column {2 + DENSE + f}: '{text}' is not a hex ID") from None
        if raw >= 1 << 32 or raw < 0:
            raise ValueError(f"{name}:{number}: column {2 + DENSE + f}: '{text}' is wider than 32 bits")
        rows.append(maps.row(f, raw) if maps is not None else f * table_size + hashed_row(raw, table_size))
    return int(label), dense, rows


def read_criteo(path, table_size, max_lines=0, maps=None):
    """Flat arrays of a whole file (or its first max_lines): labels (float32), dense features
    (float32, 13 a line) and table rows (int64, 26 a line): machine values, not Python objects,
    so that millions of lines fit in memory."""
    labels, dense, rows = array.array("f"), array.array("f"), array.array("q")
    with open(path, "r", encoding="ascii", newline="") as f:
        for number, line in enumerate(f, start=1):
            if max_lines and number > max_lines:
                break
            if line in ("\n", "\r\n"):
                continue
            y, d, r = parse_line(line, number, path, table_size, maps)
            labels.append(y)
            dense.extend(d)
            rows.extend(r)
    if not labels:
        raise ValueError(f"{path}: no lines")
    return labels, dense, rows


def loaded_libraries():
    """Paths of the shared libraries this process has mapped (which BLAS PyTorch really uses)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                libs.add(parts[5])
    return sorted(libs)


# ---- metrics ------------------------------------------------------------------------------------

def binary_metrics(probabilities, labels):
    """AUC (ties half credit, NaN with one class) and log loss (clamped), as flotilla computes them."""
    n = len(probabilities)
    order = sorted(range(n), key=lambda i: probabilities[i])
    positives = sum(1 for y in labels if y == 1)
    negatives = n - positives
    # Midranks: a group of equal scores shares the mean of its ranks.
    rank_sum_pos = 0.0
    i = 0
    while i < n:
        j = i
        while j < n and probabilities[order[j]] == probabilities[order[i]]:
            j += 1
        mid = (i + 1 + j) / 2.0
        rank_sum_pos += mid * sum(1 for k in range(i, j) if labels[order[k]] == 1)
        i = j
    if positives and negatives:
        auc = (rank_sum_pos - positives * (positives + 1) / 2.0) / (positives * negatives)
    else:
        auc = float("nan")
    loss = 0.0
    for p, y in zip(probabilities, labels):
        c = min(max(p, LOG_LOSS_CLAMP), 1.0 - LOG_LOSS_CLAMP)
        loss -= math.log(c) if y == 1 else math.log1p(-c)
    return auc, loss / n if n else float("nan")


def self_test():
    """Checks of the parts that need no torch: the parser and the metrics."""
    auc, _ = binary_metrics([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    assert abs(auc - 0.75) < 1e-12, auc
    auc, _ = binary_metrics([0.5, 0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1, 0])
    assert abs(auc - 1.0 / 6.0) < 1e-12, auc
    assert math.isnan(binary_metrics([0.2, 0.3], [0, 0])[0])
    _, ll = binary_metrics([0.9, 0.2, 0.6], [1, 0, 0])
    assert abs(ll + (math.log(0.9) + math.log(0.8) + math.log(0.4)) / 3) < 1e-12, ll
    _, ll = binary_metrics([0.0], [1])
    assert abs(ll + math.log(1e-7)) < 1e-9, ll

    line = "1\t3\t\t0\t-2" + "\t5" * 9 + "\tdeadbeef" + "\t" * 25 + "\n"
    y, d, r = parse_line(line, 1, "t", 1000)
    assert y == 1 and len(d) == DENSE and len(r) == FIELDS, (y, d, r)
    assert d[0] == math.log1p(3) and d[1] == 0.0 and d[2] == 0.0 and d[3] == 0.0, d
    assert r[0] == hashed_row(0xDEADBEEF, 1000) and r[1:] == [-1] * 25, r
    maps = IndexMaps()
    two = line.replace("\t" * 25, "\tdeadbeef\t7" + "\t" * 23)  # fields 1 and 2 present too
    _, _, r1 = parse_line(two, 1, "t", 0, maps)
    _, _, r2 = parse_line(line, 2, "t", 0, maps)
    assert r1[:3] == [0, 1, 2] and r1[3:] == [-1] * 23, r1  # the same ID in two fields: two rows
    assert r2[0] == 0 and maps.rows == 3, (r2, maps.rows)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"pytorch_ctr_self_test_{os.getpid()}.txt")
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(line + "0" + "\t" * (DENSE + FIELDS) + "\n")
        labels, dense, rows = read_criteo(path, 1000)
    finally:
        os.remove(path)
    assert list(labels) == [1.0, 0.0] and len(dense) == 2 * DENSE and len(rows) == 2 * FIELDS
    assert rows[FIELDS:] == array.array("q", [-1] * FIELDS) and dense[DENSE:] == array.array("f", [0.0] * DENSE)
    for bad in ("2" + line[1:], "1\t3" + "\t" * 3, line.replace("deadbeef", "xyz")):
        try:
            parse_line(bad, 7, "t", 1000)
        except ValueError as e:
            assert "t:7" in str(e), e
        else:
            raise AssertionError("accepted: " + bad)
    print("self-test: 4 passed, 0 failed")


# ---- training -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train")
    ap.add_argument("--test")
    ap.add_argument("--dim", type=int, default=16, help="embedding dimension per field")
    ap.add_argument("--table-size", type=int, default=1 << 18,
                    help="hashed rows per field; 0: a row per distinct (field, ID), no hashing")
    ap.add_argument("--row-init", default="normal:0.01",
                    help="the rows' initial values: normal:STD or uniform:SCALE (flotilla: uniform:0.05)")
    ap.add_argument("--tower-init", choices=("torch", "glorot"), default="torch",
                    help="the tower's initial weights: PyTorch's default, or Glorot-uniform with zero biases (flotilla's)")
    ap.add_argument("--hidden", default="64,32", help="tower widths, comma-separated, or 'none' (linear)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--tower-optimizer", choices=("adagrad", "adam"), default="adagrad")
    ap.add_argument("--tower-lr", type=float, default=None, help="the tower's learning rate (default: --lr)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-lines", type=int, default=0, help="read at most this many training lines (0: all)")
    ap.add_argument("--phases", action="store_true",
                    help="also time each step's phases (adds a clock read between them) and report them")
    ap.add_argument("--self-test", action="store_true", help="check the parser and the metrics, then exit")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.train or not a.test:
        ap.error("--train FILE and --test FILE are required")
    if a.table_size < 0:
        ap.error(f"--table-size must be 0 (no hashing) or positive, got {a.table_size}")
    try:
        init_kind, init_value = a.row_init.split(":")
        init_value = float(init_value)
    except ValueError:
        ap.error(f"--row-init: '{a.row_init}' is not normal:STD or uniform:SCALE")
    if init_kind not in ("normal", "uniform") or not (init_value >= 0 and math.isfinite(init_value)):
        ap.error(f"--row-init: '{a.row_init}' is not normal:STD or uniform:SCALE with a finite value >= 0")
    for flag, v in (("--dim", a.dim), ("--batch", a.batch),
                    ("--epochs", a.epochs), ("--threads", a.threads)):
        if v < 1:
            ap.error(f"{flag} must be at least 1, got {v}")
    if a.tower_lr is None:
        a.tower_lr = a.lr
    for flag, v in (("--lr", a.lr), ("--tower-lr", a.tower_lr)):
        if not (v > 0 and math.isfinite(v)):
            ap.error(f"{flag} must be a positive number, got {v}")
    if a.hidden.strip().lower() in ("none", ""):
        hidden = []
    else:
        try:
            hidden = [int(h) for h in a.hidden.split(",")]
        except ValueError:
            ap.error(f"--hidden: '{a.hidden}' is not a comma-separated list of widths or 'none'")
        if any(h < 1 for h in hidden):
            ap.error(f"--hidden: every width must be at least 1, got {a.hidden}")

    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    try:
        import torch
        from torch import nn
    except ImportError:
        print("pytorch_ctr: PyTorch is not installed for this Python (Debian: python3-torch)", file=sys.stderr)
        return 2

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    maps = IndexMaps() if a.table_size == 0 else None

    def tensors(path, max_lines):
        labels, dense, rows = read_criteo(path, a.table_size, max_lines, maps)
        # Copies, so that the tensors own their memory rather than borrow the arrays'.
        return (torch.frombuffer(labels, dtype=torch.float32).clone(),
                torch.frombuffer(dense, dtype=torch.float32).reshape(-1, DENSE).clone(),
                torch.frombuffer(rows, dtype=torch.int64).reshape(-1, FIELDS).clone())

    y_train, x_train, r_train = tensors(a.train, a.max_lines)
    y_test, x_test, r_test = tensors(a.test, 0)
    table_rows = maps.rows if maps is not None else FIELDS * a.table_size

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.EmbeddingBag(max(table_rows, 1), a.dim, mode="sum", sparse=True)
            if init_kind == "normal":
                nn.init.normal_(self.table.weight, std=init_value)
            else:
                nn.init.uniform_(self.table.weight, -init_value, init_value)
            layers, width = [], FIELDS * a.dim + DENSE
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ReLU()]
                width = h
            layers.append(nn.Linear(width, 1))
            self.tower = nn.Sequential(*layers)
            if a.tower_init == "glorot":
                for layer in self.tower:
                    if isinstance(layer, nn.Linear):
                        nn.init.xavier_uniform_(layer.weight)
                        nn.init.zeros_(layer.bias)

        def forward(self, rows, dense):
            # One bag per (sample, field); an empty field is an empty bag, which sums to zeros.
            flat_rows = rows.reshape(-1)
            present = flat_rows >= 0
            counts = present.to(torch.int64)
            offsets = torch.zeros_like(counts)
            offsets[1:] = torch.cumsum(counts, 0)[:-1]
            e = self.table(flat_rows[present], offsets).reshape(rows.shape[0], FIELDS * a.dim)
            return self.tower(torch.cat([e, dense], 1)).squeeze(1)

    model = Model()
    table_opt = torch.optim.Adagrad(model.table.parameters(), lr=a.lr)
    if a.tower_optimizer == "adam":
        tower_opt = torch.optim.Adam(model.tower.parameters(), lr=a.tower_lr)
    else:
        tower_opt = torch.optim.Adagrad(model.tower.parameters(), lr=a.tower_lr)
    loss_fn = nn.BCEWithLogitsLoss()

    n = y_train.shape[0]
    steps = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    phases = {"forward": 0.0, "backward": 0.0, "table_step": 0.0, "tower_step": 0.0}
    clock = time.perf_counter if a.phases else (lambda: 0.0)
    for _ in range(a.epochs):
        for b in range(0, n, a.batch):
            t0 = clock()
            logits = model(r_train[b:b + a.batch], x_train[b:b + a.batch])
            loss = loss_fn(logits, y_train[b:b + a.batch])
            table_opt.zero_grad(set_to_none=True)
            tower_opt.zero_grad(set_to_none=True)
            t1 = clock()
            loss.backward()
            t2 = clock()
            table_opt.step()
            t3 = clock()
            tower_opt.step()
            t4 = clock()
            phases["forward"] += t1 - t0
            phases["backward"] += t2 - t1
            phases["table_step"] += t3 - t2
            phases["tower_step"] += t4 - t3
            steps += 1
    train_seconds = time.perf_counter() - start
    train_cpu_seconds = time.process_time() - cpu_start
    if not math.isfinite(loss.item()):
        print(f"pytorch_ctr: the training loss is {loss.item()} after {steps} steps (try a smaller --lr)", file=sys.stderr)
        return 1

    with torch.no_grad():
        probs = []
        for b in range(0, y_test.shape[0], 8192):
            probs.append(torch.sigmoid(model(r_test[b:b + 8192], x_test[b:b + 8192])))
        p = torch.cat(probs).double().tolist()
    auc, log_loss = binary_metrics(p, [int(v) for v in y_test.tolist()])
    print("RESULT " + json.dumps({
        "samples_per_s": n * a.epochs / train_seconds,
        "auc": auc,
        "log_loss": log_loss,
        "train_seconds": train_seconds,
        "train_cpu_seconds": train_cpu_seconds,
        "table_rows": table_rows,
        "blas": next((p for p in loaded_libraries() if "blas" in os.path.basename(p)), None),
        "torch": torch.__version__,
        **({"phase_seconds": phases} if a.phases else {}),
    }))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, ValueError) as e:
        print(f"pytorch_ctr: {e}", file=sys.stderr)
        sys.exit(2)
