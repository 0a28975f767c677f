"""The synthetic data's entropy floor against direct computations."""

import math

import pytest
import torch

from apextui.core.workloads import markov


def binary_entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def test_two_state_chain_matches_closed_form():
    a, b = 0.3, 0.1
    transition = torch.tensor([[1 - a, a], [b, 1 - b]], dtype=torch.float64)
    pi = markov.stationary_distribution(transition)
    assert pi.tolist() == pytest.approx([b / (a + b), a / (a + b)])
    expected = b / (a + b) * binary_entropy(a) + a / (a + b) * binary_entropy(b)
    assert markov.entropy_rate(transition, pi) == pytest.approx(expected, rel=1e-12)


def test_random_chain_is_a_valid_stochastic_matrix():
    chain = markov.make_chain(vocab=50, branching=3, seed=7)
    p = chain.transition
    assert torch.allclose(p.sum(dim=1), torch.ones(50, dtype=torch.float64))
    assert ((p > 0).sum(dim=1) == 3).all()
    assert torch.allclose(chain.stationary @ p, chain.stationary, atol=1e-12)
    assert 0 < chain.entropy_rate <= math.log(3) + 1e-12


def test_entropy_rate_matches_a_direct_sum_over_states():
    chain = markov.make_chain(vocab=20, branching=4, seed=1)
    p, pi = chain.transition.tolist(), chain.stationary.tolist()
    direct = -sum(pi[i] * sum(x * math.log(x) for x in row if x > 0) for i, row in enumerate(p))
    assert chain.entropy_rate == pytest.approx(direct, rel=1e-12)


def test_sampled_tokens_have_the_entropy_rate_as_mean_log_loss():
    chain = markov.make_chain(vocab=32, branching=4, seed=3)
    tokens = markov.sample(chain, batch=256, length=200, seed=4)
    nll = -torch.log(chain.transition[tokens[:, :-1], tokens[:, 1:]]).mean().item()
    # the empirical cross-entropy of the true model converges to the entropy rate
    assert nll == pytest.approx(chain.entropy_rate, abs=0.02)
    # and every sampled transition is one the chain allows
    assert (chain.transition[tokens[:, :-1], tokens[:, 1:]] > 0).all()
