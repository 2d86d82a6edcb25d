"""Builds (sm_90) a subset of the catalogue in 2 processes and exports it: the training kernels in the dtype keys
given, the channels_last one-launch kernels in every dtype key."""

import sys
import time
from multiprocessing import Pool
from pathlib import Path

from rust_kernels import cache, kernels
from rust_kernels.builder import cached_entry
from rust_kernels.families.batch_norm import training

KEYS = set(sys.argv[2].split(","))
NEWKEYS = set(sys.argv[3].split(","))
NEW = tuple(training.FUSED_COLUMNS.values())
OLD = training.FORWARD_KERNELS + training.BACKWARD_KERNELS
SKIP = tuple(training.FUSED.values()) if "--no-nchw-fused" in sys.argv else ()


def wanted():
    out = []
    for i, k in enumerate(kernels.instances()):
        if (isinstance(k, NEW) and k.dtype_key in NEWKEYS) or (
            isinstance(k, OLD) and not isinstance(k, SKIP) and k.dtype_key in KEYS
        ):
            out.append(i)
    return out


def one(i):
    k = kernels.instances()[i]
    cached_entry(k, "sm_90")
    return i


if __name__ == "__main__":
    todo = wanted()
    print(len(todo), "instances", flush=True)
    t = time.time()
    with Pool(2) as pool:
        for n, _ in enumerate(pool.imap_unordered(one, todo, chunksize=4)):
            if n % 50 == 0:
                print(n, round(time.time() - t), flush=True)
    allk = kernels.instances()
    entries = [cached_entry(allk[i], "sm_90") for i in todo]
    cache.export(entries, Path(sys.argv[1]))
    print("exported", len(entries), round(time.time() - t), flush=True)
