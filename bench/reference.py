"""The tutorial's own training, in PyTorch, for the side-by-side benchmark (`side_by_side.py`).

Written here from the tutorial's description (docs in `../shared/reference/tutorial.md` of the
team's notes: `networks/vit.py`, `utils/data_loader.py`, `train.py`): the same ViT with three
separate q, k, v projections, the relative L2 loss, Adam with betas (0.9, 0.95), the cosine
schedule, an h5py `Dataset` behind `torch.utils.data.DataLoader` with worker processes, and the
tutorial's log lines. It runs on the CPU, like Scalebook on this machine, so the two can be
timed on the same files.

    python reference.py train --yaml-config config/ViT.yaml --config cpu_short [--seed S]
    python reference.py load  --yaml-config config/ViT.yaml --config cpu_short --workers 2

`train` prints the tutorial's log lines (`Time taken for epoch N is ... samples/sec`, `Avg train
loss=`, `Avg val loss=`); `load` prints one JSON line with the loader's samples/s.
"""

import argparse
import glob
import json
import logging
import math
import os
import time

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, Dataset


def load_params(path, name, overrides):
    with open(path) as f:
        params = yaml.safe_load(f)[name]
    params.update(overrides)
    return {k: plain_value(v) for k, v in params.items()}


def plain_value(v):
    """The tutorial's YParams reads the word None as Python's None. PyYAML follows YAML 1.1,
    where a float needs a dot, so it reads `5E-4` as a string; YAML 1.2 (Scalebook's reader)
    reads a float."""
    if v == "None":
        return None
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            pass
    return v


# --- the model: networks/vit.py ----------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, dim, num_heads, drop):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim, bias=True)
        self.k = nn.Linear(dim, dim, bias=True)
        self.v = nn.Linear(dim, dim, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.drop = drop

    def forward(self, x):
        b, n, d = x.shape
        split = lambda t: t.reshape(b, n, self.num_heads, d // self.num_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), dropout_p=self.drop)
        return F.dropout(self.proj(y.transpose(1, 2).reshape(b, n, d)), self.drop, self.training)


class Mlp(nn.Module):
    def __init__(self, dim, hidden, drop):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(F.gelu(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, dim, num_heads, drop):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads, drop)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim, drop)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, p):
        super().__init__()
        d, self.patch = p["embed_dim"], p["patch_size"]
        self.h, self.w = p["img_size"][0] // self.patch, p["img_size"][1] // self.patch
        self.out_chans = p["n_out_channels"]
        self.patch_embed = nn.Conv2d(p["n_in_channels"], d, kernel_size=self.patch, stride=self.patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.h * self.w, d))
        self.pos_drop = nn.Dropout(p["dropout"])
        self.blocks = nn.ModuleList([Block(d, p["num_heads"], p["dropout"]) for _ in range(p["depth"])])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, self.out_chans * self.patch * self.patch, bias=False)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = self.pos_drop(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        x = self.head(self.norm(x))
        b, p = x.shape[0], self.patch
        x = x.reshape(b, self.h, self.w, p, p, self.out_chans)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(b, self.out_chans, self.h * p, self.w * p)


def l2_loss(pred, tar):
    num = torch.linalg.norm(pred.reshape(pred.shape[0], -1) - tar.reshape(tar.shape[0], -1), 2, dim=1)
    den = torch.linalg.norm(tar.reshape(tar.shape[0], -1), 2, dim=1)
    return torch.mean(num / den)


# --- the data: utils/data_loader.py -------------------------------------------------------


class ERA5Dataset(Dataset):
    def __init__(self, p, location, limit):
        self.files_paths = sorted(glob.glob(location + "/*.h5"))
        self.dt, (self.h, self.w) = p["dt"], p["img_size"]
        with h5py.File(self.files_paths[0], "r") as f:
            self.n_per_year = f["fields"].shape[0]
        self.n_samples = len(self.files_paths) * self.n_per_year
        if limit is not None:
            self.n_samples = min(self.n_samples, limit)
        self.means = np.load(p["global_means_path"])[0]
        self.stds = np.load(p["global_stds_path"])[0]
        self.files = [None] * len(self.files_paths)

    def __len__(self):
        return self.n_samples

    def _field(self, year):
        if self.files[year] is None:
            self.files[year] = h5py.File(self.files_paths[year], "r")["fields"]
        return self.files[year]

    def __getitem__(self, global_idx):
        year, local = global_idx // self.n_per_year, global_idx % self.n_per_year
        local = local % (self.n_per_year - self.dt)
        if local < self.dt:
            local += self.dt
        fields = self._field(year)
        inp = fields[local, :, 0 : self.h, 0 : self.w]
        tar = fields[local + self.dt, :, 0 : self.h, 0 : self.w]
        inp = (inp - self.means) / self.stds
        tar = (tar - self.means) / self.stds
        return torch.as_tensor(inp), torch.as_tensor(tar)


def worker_init(worker_id):
    np.random.seed(torch.utils.data.get_worker_info().seed % 2**32)


def data_loader(p, location, limit, workers):
    dataset = ERA5Dataset(p, location, limit)
    return DataLoader(
        dataset,
        batch_size=p["global_batch_size"],
        num_workers=workers,
        shuffle=True,
        worker_init_fn=worker_init,
        drop_last=True,
        persistent_workers=workers > 0,
        pin_memory=torch.cuda.is_available(),
    )


# --- the loop: train.py -------------------------------------------------------------------


def train(p, seed):
    log = logging.getLogger("root")
    if seed is not None:
        torch.manual_seed(seed)
    workers = p["num_data_workers"]
    train_loader = data_loader(p, p["train_data_path"], p["limit_nsamples"], workers)
    valid_loader = data_loader(p, p["valid_data_path"], p["limit_nsamples_val"], workers)
    model = VisionTransformer(p)
    optimizer = torch.optim.Adam(model.parameters(), lr=p["lr"], betas=(0.9, 0.95), fused=bool(p["enable_jit"]))
    iters_per_epoch = len(train_loader)
    epochs = p["num_iters"] // iters_per_epoch
    if p["warmup"] > 0:
        w, n = p["warmup"], p["num_iters"]
        schedule = lambda s: min((s + 1) / w, 0.5 * (1 + math.cos(math.pi * s / n)))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    else:
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=p["num_iters"])
    log.info("Starting Training Loop...")
    for epoch in range(epochs):
        model.train()
        start, losses = time.time(), []
        for inp, tar in train_loader:
            optimizer.zero_grad()
            loss = l2_loss(model(inp), tar)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            scheduler.step()
        elapsed = time.time() - start
        samples_per_sec = p["global_batch_size"] * iters_per_epoch / elapsed
        log.info("Time taken for epoch %i is %f sec, avg %f samples/sec", epoch + 1, elapsed, samples_per_sec)
        log.info("  Avg train loss=%f", np.mean(losses))
        model.eval()
        val_start, val_loss, steps = time.time(), torch.zeros(()), 0
        with torch.inference_mode(), torch.no_grad():
            for inp, tar in valid_loader:
                val_loss += l2_loss(model(inp), tar)
                steps += 1
        log.info("  Avg val loss={}".format((val_loss / steps).item()))
        log.info("  Total validation time: {} sec".format(time.time() - val_start))
    log.info("DONE ---- rank 0")


def load(p, workers, epochs):
    """Samples/s of the loader alone, over the last of `epochs` passes (the first warms the
    page cache and starts the persistent workers)."""
    loader = data_loader(p, p["train_data_path"], p["limit_nsamples"], workers)
    for _ in range(epochs):
        start, samples = time.time(), 0
        for inp, _ in loader:
            samples += inp.shape[0]
        rate = samples / (time.time() - start)
    print(json.dumps({"workers": workers, "samples_per_sec": rate}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["train", "load"])
    parser.add_argument("--yaml-config", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--workers", type=int, help="data loader workers (default: the config's)")
    parser.add_argument("--epochs", type=int, default=2, help="loader passes for `load`; the last is timed")
    parser.add_argument("--limit", type=int, help="samples the loader reads per pass (default: the config's)")
    args = parser.parse_args()
    overrides = {} if args.workers is None else {"num_data_workers": args.workers}
    if args.limit is not None:
        overrides["limit_nsamples"] = args.limit
    p = load_params(args.yaml_config, args.config, overrides)
    logging.basicConfig(format="%(asctime)s - %(name)s - %(levelname)s - %(message)s", level=logging.INFO)
    if args.mode == "train":
        train(p, args.seed)
    else:
        load(p, p["num_data_workers"], args.epochs)


if __name__ == "__main__":
    main()
