#!/usr/bin/env python3
"""The BatchNorm2d shape suite (python/rust_kernels/bench/suites/batch_norm_2d.json): the input shape of every
BatchNorm2d in torchvision's resnet50, resnext50_32x4d, mobilenet_v2, mobilenet_v3_large, efficientnet_b0,
densenet121, inception_v3 and regnet_y_400mf at batch 1, 32 and 128, deduplicated, plus the extremes plans must also
fit: H*W = 1 (BatchNorm after global pooling) with C up to 4096 and B up to 1024, C = 1, B = 1 at 1024x1024, tiny
spatial sizes (2x2 to 9x9) with C up to 2560. The models run on the meta device (shapes only, no data), so any
machine with torchvision makes the same file.

    python scripts/bn_shape_suite.py            # rewrites the suite file
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torchvision

OUT = Path(__file__).resolve().parents[1] / "python" / "rust_kernels" / "bench" / "suites" / "batch_norm_2d.json"
MODELS = {  # name -> (constructor keyword arguments, input side)
    "resnet50": ({}, 224),
    "resnext50_32x4d": ({}, 224),
    "mobilenet_v2": ({}, 224),
    "mobilenet_v3_large": ({}, 224),
    "efficientnet_b0": ({}, 224),
    "densenet121": ({}, 224),
    "inception_v3": ({"init_weights": False, "aux_logits": False}, 299),
    "regnet_y_400mf": ({}, 224),
}
BATCHES = (1, 32, 128)
EXTREMES = {
    "H*W = 1 (after global pooling)": [(1024, 4096, 1, 1), (256, 4096, 1, 1), (1024, 2048, 1, 1), (32, 2560, 1, 1),
                                       (8, 4096, 1, 1), (1024, 1, 1, 1)],
    "C = 1": [(128, 1, 56, 56), (1024, 1, 32, 32), (8, 1, 224, 224)],
    "B = 1 at 1024x1024": [(1, 3, 1024, 1024), (1, 16, 1024, 1024), (1, 64, 1024, 1024)],
    "tiny spatial, many channels": [(128, 2560, 2, 2), (64, 1280, 3, 3), (128, 720, 4, 4), (32, 2560, 5, 5),
                                    (64, 1024, 6, 6), (128, 1536, 7, 7), (64, 768, 8, 8), (128, 2048, 9, 9)],
}  # fmt: skip


def model_shapes() -> dict[tuple[int, ...], list[str]]:
    found: dict[tuple[int, ...], list[str]] = {}
    for name, (kwargs, side) in MODELS.items():
        model = getattr(torchvision.models, name)(weights=None, **kwargs).eval().to("meta")
        for batch in BATCHES:
            seen: set[tuple[int, ...]] = set()

            def hook(_module, args, seen=seen):
                seen.add(tuple(args[0].shape))

            norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
            handles = [m.register_forward_pre_hook(hook) for m in norms]
            with torch.no_grad():
                model(torch.empty(batch, 3, side, side, device="meta"))
            for h in handles:
                h.remove()
            for shape in seen:
                found.setdefault(shape, []).append(f"{name}@{batch}")
    return found


def main() -> None:
    shapes = model_shapes()
    for what, extra in EXTREMES.items():
        for shape in extra:
            shapes.setdefault(shape, []).append(what)
    suite = [{"shape": list(s), "from": sources} for s, sources in sorted(shapes.items())]
    meta = {"torch": torch.__version__, "torchvision": torchvision.__version__, "models": list(MODELS),
            "batches": list(BATCHES)}  # fmt: skip
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"made_by": "scripts/bn_shape_suite.py", **meta, "shapes": suite}, indent=1) + "\n")
    print(f"{len(suite)} shapes -> {OUT}")


if __name__ == "__main__":
    main()
