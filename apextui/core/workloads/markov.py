"""Synthetic training data: token sequences from a random first-order Markov chain.

Its entropy rate H = -sum_i pi_i sum_j P_ij log P_ij (nats per token) is computed
exactly, so a model's cross-entropy has a known floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class MarkovChain:
    """Transition matrix (rows sum to 1), stationary distribution and entropy rate,
    plus each token's successors and their cumulative weights for fast sampling."""

    transition: torch.Tensor  # (V, V) float64
    stationary: torch.Tensor  # (V,) float64
    entropy_rate: float  # nats per token
    successors: torch.Tensor  # (V, k) long
    cum_weights: torch.Tensor  # (V, k) float64, last column 1

    @property
    def vocab(self) -> int:
        return self.transition.shape[0]


def stationary_distribution(transition: torch.Tensor) -> torch.Tensor:
    """Solve pi P = pi, sum(pi) = 1 for an irreducible chain."""
    p = transition.to(torch.float64)
    v = p.shape[0]
    a = p.T - torch.eye(v, dtype=torch.float64)
    a[-1, :] = 1.0
    b = torch.zeros(v, dtype=torch.float64)
    b[-1] = 1.0
    pi = torch.linalg.solve(a, b)
    return pi.clamp_min(0) / pi.clamp_min(0).sum()


def entropy_rate(transition: torch.Tensor, stationary: torch.Tensor) -> float:
    """H = -sum_i pi_i sum_j P_ij log P_ij, in nats."""
    p = transition.to(torch.float64)
    plogp = torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))
    return float(-(stationary.to(torch.float64) * plogp.sum(dim=1)).sum())


def make_chain(vocab: int, branching: int, seed: int) -> MarkovChain:
    """A random chain where each token has `branching` successors with random weights.

    Token i always may be followed by i+1 (mod V), which makes the chain irreducible.
    """
    if not 1 <= branching <= vocab:
        raise ValueError(f"branching must be within 1..{vocab}, got {branching}")
    g = torch.Generator().manual_seed(seed)
    succ = torch.rand(vocab, vocab, generator=g).argsort(dim=1)[:, :branching]
    ring = (torch.arange(vocab) + 1) % vocab
    has_ring = (succ == ring[:, None]).any(dim=1)
    succ[~has_ring, 0] = ring[~has_ring]
    weights = -torch.log(torch.rand(vocab, branching, generator=g, dtype=torch.float64).clamp_min(1e-12))
    weights = weights / weights.sum(dim=1, keepdim=True)
    transition = torch.zeros(vocab, vocab, dtype=torch.float64)
    transition.scatter_(1, succ, weights)
    pi = stationary_distribution(transition)
    cum = weights.cumsum(dim=1)
    cum[:, -1] = 1.0
    return MarkovChain(transition, pi, entropy_rate(transition, pi), succ, cum)


def sample(chain: MarkovChain, batch: int, length: int, seed: int, device: Any = "cpu") -> torch.Tensor:
    """`batch` sequences of `length` tokens, the first drawn from the stationary distribution.
    Runs on `device`: each position is a gather over the k successors, not over the vocabulary."""
    g = torch.Generator(device=device).manual_seed(seed)
    succ = chain.successors.to(device)
    cum = chain.cum_weights.to(device)
    tokens = torch.empty(batch, length, dtype=torch.long, device=device)
    tokens[:, 0] = torch.multinomial(chain.stationary.to(device), batch, replacement=True, generator=g)
    u = torch.rand(length, batch, 1, generator=g, dtype=torch.float64, device=device)
    last = succ.shape[1] - 1
    for t in range(1, length):
        prev = tokens[:, t - 1]
        pick = torch.searchsorted(cum[prev], u[t]).clamp_max_(last)
        tokens[:, t] = succ[prev, pick.squeeze(1)]
    return tokens
