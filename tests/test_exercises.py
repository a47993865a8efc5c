"""The exercise checkers accept correct solutions and reject typical mistakes, with feedback."""

from __future__ import annotations

import math

import numpy as np

from lib import exercises


def good_power(F, x0, steps):
    x = x0 / np.linalg.norm(x0)
    for _ in range(steps):
        x = F @ x
        x = x / np.linalg.norm(x)
    return x


def test_power_method_checker(capsys):
    assert exercises.check_power_method(good_power)
    assert "6/6" in capsys.readouterr().out
    # row convention (x @ F) is the classic mistake
    assert not exercises.check_power_method(lambda F, x, T: good_power(F.T, x, T))
    # forgetting to normalize
    assert not exercises.check_power_method(lambda F, x, T: np.linalg.matrix_power(F, T) @ x)

    def mutating(F, x, T):
        x /= np.linalg.norm(x)
        return good_power(F, x, T)

    assert not exercises.check_power_method(mutating)

    def todo(F, x, T):
        raise NotImplementedError

    assert not exercises.check_power_method(todo)
    assert "not implemented yet" in capsys.readouterr().out


def test_head_sum_checker():
    def good(O, V, H):
        dh = V.shape[0] // H
        return sum(O[:, h * dh:(h + 1) * dh] @ V[h * dh:(h + 1) * dh] for h in range(H))

    def wrong_blocks(O, V, H):  # O_h taken as rows of O: fails (or raises) unless shapes happen to fit
        dh = V.shape[0] // H
        return sum(O[h * dh:(h + 1) * dh].T @ V[h * dh:(h + 1) * dh] for h in range(H))

    assert exercises.check_head_sum(good)
    assert not exercises.check_head_sum(wrong_blocks)
    assert not exercises.check_head_sum(lambda O, V, H: V @ O)


def test_steps_needed_checker():
    assert exercises.check_steps_needed(lambda r, tol: math.ceil(math.log(tol) / math.log(r)))
    assert not exercises.check_steps_needed(lambda r, tol: math.floor(math.log(tol) / math.log(r)))


def test_bipartite_checker():
    assert exercises.check_bipartite_condition(lambda c, p, m: math.exp(2 * c) > max(p / m, m / p))
    assert not exercises.check_bipartite_condition(lambda c, p, m: c > 0)


def test_linearization_checker():
    def good(lams, k):
        return np.abs(np.delete(lams, k)).max() / abs(lams[k])

    assert exercises.check_linearization_radius(good)
    assert not exercises.check_linearization_radius(lambda lams, k: abs(lams[1] / lams[0]))
