"""A Llama-style decoder for `apextui --model examples/llama.py:build`: about 220 M parameters at full size
(16 layers, d_model 1024, 16 heads, vocab 32000, 1024 tokens, batch 8), a tiny one on CPU.

Written as LLM codebases write it, self-contained (no transformers import, no downloads): its own `RMSNorm` class
(`variance_epsilon`, computed in fp32 and cast back, as HF's `LlamaRMSNorm`), rotary position embeddings, a
SwiGLU MLP, no biases, untied output head. apextui's norm finder recognises the RMSNorm by what it computes, so
the `fused_norms` variant swaps it for Apex's `FusedRMSNorm`. The loss is cross-entropy on the next token.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from apextui import ModelSetup


class RMSNorm(nn.Module):
    """Root-mean-square norm, in fp32 whatever the input's dtype (as HF's LlamaRMSNorm)."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(dtype)


def rotary(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary embedding, (seq, head_dim)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, d // heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (p(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        cos, sin = cos[:t].to(q.dtype), sin[:t].to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, d: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(d), RMSNorm(d)
        self.self_attn = Attention(d, heads)
        self.mlp = MLP(d, hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab: int, seq: int, d: int, layers: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        cos, sin = rotary(seq, d // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():  # Llama's initialisation: normal(0, 0.02)
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.lm_head(self.norm(x))


def build(small: bool = False) -> ModelSetup:
    """Full size: ~220 M parameters, batch 8 x 1024 tokens. small (CPU): 2 layers, d_model 32, 16 tokens."""
    if small:
        vocab, seq, d, layers, heads, hidden, batch = 256, 16, 32, 2, 2, 64, 4
    else:
        vocab, seq, d, layers, heads, hidden, batch = 32000, 1024, 1024, 16, 16, 1792, 8

    def make_batch(device: torch.device, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, vocab, (batch, seq + 1), device=device, generator=generator)
        return tokens[:, :-1], tokens[:, 1:]

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())

    return ModelSetup(model=Llama(vocab, seq, d, layers, heads, hidden), make_batch=make_batch, loss_fn=loss_fn,
                      lr=3e-4, units="tokens", units_per_step=batch * seq)
