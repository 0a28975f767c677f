"""Models nobody here wrote: Hugging Face `transformers` GPT-2 small and a Llama-style decoder, built from their
configs with random weights (no download), for `apextui advise --model examples/hf.py:gpt2` (or `:llama`).

Needs `pip install transformers`. Dropout stays at the configs' defaults (GPT-2: 0.1), as in real training. The
batch is a dict with `labels`, so the model returns its own loss.
"""

from __future__ import annotations

import torch

from apextui import ModelSetup


def _batch(vocab: int, batch: int, seq: int):  # type: ignore[no-untyped-def]
    def make_batch(device: torch.device, generator: torch.Generator) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, vocab, (batch, seq), device=device, generator=generator)
        return {"input_ids": ids, "labels": ids}

    return make_batch


def gpt2(small: bool = False) -> ModelSetup:
    """GPT-2 small (124 M parameters), batch 16 x 512; on CPU 2 layers of width 64, batch 2 x 16."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if small:
        config, batch, seq = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=64), 2, 16
    else:
        config, batch, seq = GPT2Config(), 16, 512
    return ModelSetup(model=GPT2LMHeadModel(config), make_batch=_batch(config.vocab_size, batch, seq), lr=3e-4,
                      units="tokens", units_per_step=batch * seq)


def llama(small: bool = False) -> ModelSetup:
    """A Llama-style decoder (about 220 M parameters: 16 layers, width 1024, vocab 32000), batch 8 x 1024; on CPU
    2 layers of width 64. Its norms are transformers' own `LlamaRMSNorm` class."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if small:
        config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
        batch, seq = 2, 16
    else:
        config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                             num_key_value_heads=16, vocab_size=32000, max_position_embeddings=1024)
        batch, seq = 8, 1024
    return ModelSetup(model=LlamaForCausalLM(config), make_batch=_batch(config.vocab_size, batch, seq), lr=3e-4,
                      units="tokens", units_per_step=batch * seq)
