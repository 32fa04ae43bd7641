"""Levenberg-Marquardt (optimisers.LevenbergMarquardt) on problems with known answers."""

import numpy as np
import pytest
import torch

from gradsim_taichi.optimisers import LevenbergMarquardt, Optimiser

T = torch.linspace(0.0, 2.0, 40, dtype=torch.float64)
TRUE = torch.tensor([1.5, -0.7, 0.3], dtype=torch.float64)


def model(p):
    return p[0] * torch.exp(p[1] * T) + p[2]


def residual_of(p):
    return lambda: model(p.detach()) - model(TRUE)


def test_lm_jacobian_matches_the_analytic_one():
    """LM's forward differences: accurate to about sqrt(eps); central ones (the
    uncertainty's) to about eps^(2/3)."""
    from gradsim_taichi.optimisers import fd_jacobian

    p = torch.tensor([0.9, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    lm = LevenbergMarquardt([p])
    jac = lm.jacobian(residual_of(p), p.detach().clone(), residual_of(p)())
    a, b = 0.9, -0.2
    exact = torch.stack([torch.exp(b * T), a * T * torch.exp(b * T), torch.ones_like(T)], 1)
    np.testing.assert_allclose(jac.numpy(), exact.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(p.detach().numpy(), [0.9, -0.2, 0.1])  # values restored

    def evaluate(x):
        return model(x) - model(TRUE)

    x = p.detach().clone()
    central = fd_jacobian(evaluate, x, evaluate(x))
    np.testing.assert_allclose(central.numpy(), exact.numpy(), rtol=1e-9, atol=1e-10)
    calls = []
    fd_jacobian(lambda y: calls.append(1) or evaluate(y), x, evaluate(x), central=False)
    assert len(calls) == 3  # one evaluation per column


def test_lm_fits_a_nonlinear_least_squares_problem_to_machine_precision():
    p = torch.tensor([0.5, 0.4, -1.0], dtype=torch.float64, requires_grad=True)
    opt = Optimiser("lm", [p], lr=1.0, iters=30)
    losses = [float(opt.step(residual_of(p))[0]) for _ in range(30)]
    np.testing.assert_allclose(p.detach().numpy(), TRUE.numpy(), atol=1e-10)
    assert losses[-1] < 1e-20 and all(b <= a for a, b in zip(losses, losses[1:]))


def test_lm_rejects_steps_that_raise_the_loss_or_leave_the_domain():
    p = torch.tensor([0.5, 0.4, -1.0], dtype=torch.float64, requires_grad=True)
    lm = LevenbergMarquardt([p], max_step=10.0)

    def residual():  # undefined below p[1] = 0.3: the first (long) trials fail
        return None if float(p.detach()[1]) < 0.3 else residual_of(p)()

    before = float((residual() ** 2).mean())
    lm.step(residual)
    after = float((residual() ** 2).mean())
    assert after < before and float(p.detach()[1]) >= 0.3
    assert lm.damping > 1e-3  # grown by the rejected trials


def test_lm_step_is_capped_and_undefined_start_is_nan():
    p = torch.tensor([0.5, 0.4, -1.0], dtype=torch.float64, requires_grad=True)
    lm = LevenbergMarquardt([p], max_step=0.01)
    start = p.detach().clone()
    lm.step(residual_of(p))
    assert 0 < float((p.detach() - start).abs().max()) <= 0.01 + 1e-15
    moved = p.detach().clone()
    assert torch.isnan(lm.step(lambda: None))
    assert torch.equal(p.detach(), moved)


def test_lm_refuses_too_many_unknowns():
    with pytest.raises(ValueError, match="at most 32 unknowns.*have 40"):
        LevenbergMarquardt([torch.zeros(40, requires_grad=True)])


def test_lm_doubles_a_step_the_linear_model_underestimates():
    # r = (x - 3)^5: from 0, Gauss-Newton steps a fifth of the way (to 0.6); doubling
    # goes on to 1.2 and 2.4 (4.8 is farther from 3 again)
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    lm = LevenbergMarquardt([x], max_step=10.0, damping=1e-12)
    lm.step(lambda: (x.detach() - 3.0) ** 5)
    assert float(x.detach()) == pytest.approx(2.4, abs=1e-6)


def test_lm_stops_at_once_below_its_tolerance():
    p = torch.tensor([1.5, -0.7, 0.3 + 1e-12], dtype=torch.float64, requires_grad=True)
    calls = []

    def residual():
        calls.append(1)
        return residual_of(p)()

    LevenbergMarquardt([p], tolerance=1e-20).step(residual)
    assert len(calls) == 1
    LevenbergMarquardt([p]).step(residual)
    assert len(calls) > 4  # Jacobian (3) and a trial


def test_lm_within_directions_stays_in_their_span_and_solves_there():
    """``directions``: the unknowns are the coefficients of these columns (the coarse
    stage's affine fields); a Jacobian costs one evaluation per column, not per element."""
    d = torch.linalg.qr(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]],
                                     dtype=torch.float64))[0]
    start = TRUE + d @ torch.tensor([0.4, -0.3], dtype=torch.float64)  # truth in the span
    p = start.clone().requires_grad_(True)
    calls = []

    def residual():
        calls.append(1)
        return residual_of(p)()

    lm = LevenbergMarquardt([p], max_step=1.0, directions=d)
    off_span = []
    for _ in range(25):
        lm.step(residual)
        step = p.detach() - start
        off_span.append(float((step - d @ (d.T @ step)).norm()))
    np.testing.assert_allclose(p.detach().numpy(), TRUE.numpy(), atol=1e-10)
    assert max(off_span) < 1e-14
    calls.clear()
    p.data = start.clone()
    LevenbergMarquardt([p], directions=d).jacobian(residual, start, residual_of(p)())
    assert len(calls) == 2  # one per column
    LevenbergMarquardt([torch.zeros(40)], directions=torch.eye(40)[:, :12])  # 12 unknowns


def test_lm_does_not_double_a_step_that_solved_the_problem():
    """A linear residual: the Gauss-Newton step is exact, so no doubled trial follows
    (residual, one Jacobian column, the trial), and the step ends at the tolerance."""
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    calls = []

    def residual():
        calls.append(float(x.detach()))
        return (x.detach() - 3.0) * torch.ones(4, dtype=torch.float64)

    lm = LevenbergMarquardt([x], max_step=10.0, damping=1e-12, tolerance=1e-20)
    lm.step(residual)
    assert float(x.detach()) == pytest.approx(3.0, abs=1e-7)
    assert len(calls) == 3 and lm.at_tolerance


def test_lm_with_a_projection_keeps_a_bounded_value_in_bounds_and_learns_the_rest():
    """``project``: steps (and the Jacobian's columns) are taken at projected values.
    The strength ``s`` lives in [0, 1] and its unconstrained optimum (-0.5) lies below
    it; the model clamps it, as the nuisance strengths are. Without the projection the
    first step left ``s`` below 0, where the model no longer sees it."""
    p = torch.tensor([0.5, 0.4, -1.0], dtype=torch.float64, requires_grad=True)
    s = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)

    def residual():
        ramp = s.detach().clamp(0.0, 1.0) * T
        return torch.cat([model(p.detach()) - model(TRUE), ramp + 0.5 * T])

    def project():
        with torch.no_grad():
            s.clamp_(0.0, 1.0)

    lm = LevenbergMarquardt([p, s], max_step=10.0, project=project)
    seen = []
    for _ in range(30):
        lm.step(residual)
        seen.append(float(s.detach()))
    assert min(seen) >= 0.0 and seen[-1] == 0.0
    np.testing.assert_allclose(p.detach().numpy(), TRUE.numpy(), atol=1e-8)
    free = torch.tensor([0.5], dtype=torch.float64, requires_grad=True)
    s = free
    LevenbergMarquardt([p, s], max_step=10.0).step(residual)
    assert float(s.detach()) < 0.0  # what the projection prevents


def test_lm_holds_a_value_at_its_bound_and_solves_the_rest_in_one_step():
    """A value at its bound that the step would take out of it is held, and the step
    is solved over the others: on a linear residual whose unconstrained minimum lies
    outside ``x0 >= 0``, the first step from ``x0 = 0`` lands on the constrained
    minimum. Projecting the full step instead moves ``x1`` along a solution that counted
    on ``x0`` going negative (the two columns nearly parallel), and creeps."""
    A = torch.tensor([[1.0, 0.9], [0.9, 1.0], [0.3, 0.2]], dtype=torch.float64)
    b = torch.tensor([-1.0, 0.5, 0.2], dtype=torch.float64)
    assert float(torch.linalg.lstsq(A, b[:, None]).solution[0, 0]) < 0
    x = torch.tensor([0.0, 0.0], dtype=torch.float64, requires_grad=True)

    def project():
        with torch.no_grad():
            x[0].clamp_(min=0.0)

    lm = LevenbergMarquardt([x], max_step=10.0, damping=1e-9, project=project)
    lm.step(lambda: A @ x.detach() - b)
    best = float(A[:, 1] @ b / (A[:, 1] @ A[:, 1]))  # x0 = 0 held
    np.testing.assert_allclose(x.detach().numpy(), [0.0, best], rtol=1e-6, atol=1e-12)


def test_lm_survives_a_jacobian_of_zeros_at_its_smallest_damping():
    """Parameters the residual does not see (a shadow strength with no shadow in view):
    no step, no error, the values kept."""
    x = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    lm = LevenbergMarquardt([x], damping=1e-12)
    for _ in range(3):
        lm.step(lambda: torch.ones(5, dtype=torch.float64))
    np.testing.assert_allclose(x.detach().numpy(), [0.3, 0.7])
