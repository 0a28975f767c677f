"""A GPT-style decoder for `apextui --model examples/gpt.py:build`: about 125 M parameters at full size
(GPT-2 small's shape: 12 layers, d_model 768, 12 heads, vocab 50257, 1024 positions), a tiny one on CPU.

Self-contained: random tokens, no downloads. The language-model loss is cross-entropy on the next token.
Dropout 0.1 on the embeddings, the attention weights and each residual branch, as GPT-2 has.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from apextui import ModelSetup


class Block(nn.Module):
    """Pre-norm decoder block: causal self-attention and a GELU MLP, each with dropout (GPT-2's 0.1)."""

    def __init__(self, d: int, heads: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.heads = heads
        self.attn_dropout = dropout  # on the attention weights, in training only
        self.drop = nn.Dropout(dropout)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.Sequential(*(Block(d, heads) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2
        for m in self.modules():  # GPT-2's initialisation: the first loss is about ln(vocab), as in real training
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln_f(self.blocks(self.drop(self.tok(idx) + self.pos(pos)))))


def build(small: bool = False) -> ModelSetup:
    """Full size: ~124 M parameters, batch 8 x 1024 tokens. small (CPU): 2 layers, d_model 32, 16 tokens."""
    if small:
        vocab, seq, d, layers, heads, batch = 256, 16, 32, 2, 2, 4
    else:
        vocab, seq, d, layers, heads, batch = 50257, 1024, 768, 12, 12, 8

    def make_batch(device: torch.device, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, vocab, (batch, seq + 1), device=device, generator=generator)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    return ModelSetup(model=GPT(vocab, seq, d, layers, heads), make_batch=make_batch, loss_fn=loss_fn, lr=3e-4,
                      units="tokens", units_per_step=batch * seq)
