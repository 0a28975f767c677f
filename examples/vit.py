"""A small Vision Transformer for `apextui --model examples/vit.py:build`: ViT-S/16 on 224 x 224 images
(12 layers, d_model 384, 6 heads, ~22 M parameters) at full size, a tiny one on CPU.

Self-contained: random images and labels, no downloads. The model returns its loss (no loss_fn): the
batch is (images, labels), passed to forward as two arguments. Dropout 0.1 in every encoder layer.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from apextui import ModelSetup


class ViT(nn.Module):
    def __init__(self, image: int, patch: int, d: int, layers: int, heads: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, d, kernel_size=patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.encoder(x))
        return F.cross_entropy(self.head(x[:, 0]).float(), labels)


def build(small: bool = False) -> ModelSetup:
    """Full size: ViT-S/16, batch 64 of 224 x 224 images, 1000 classes. small (CPU): 32 x 32 images, 2 layers."""
    if small:
        image, patch, d, layers, heads, classes, batch = 32, 8, 32, 2, 2, 10, 4
    else:
        image, patch, d, layers, heads, classes, batch = 224, 16, 384, 12, 6, 1000, 64

    def make_batch(device: torch.device, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randn(batch, 3, image, image, device=device, generator=generator)
        labels = torch.randint(0, classes, (batch,), device=device, generator=generator)
        return images, labels

    return ModelSetup(model=ViT(image, patch, d, layers, heads, classes), make_batch=make_batch, lr=1e-3,
                      units="images")
