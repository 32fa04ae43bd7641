"""Particle system physics against closed forms."""

import numpy as np
import pytest

import gradsim_taichi as gs


def rollout(builder, frames, substeps, dt, **kw):
    sim = gs.Simulation(builder.finalize(), frames=frames, substeps=substeps, dt=dt, **kw)
    return sim, sim.forward()["particles"]


def test_free_fall_and_projectile_match_semi_implicit_euler_closed_form():
    b = gs.ModelBuilder(ground=False, gravity=(0.0, -9.8, 0.0))
    x0 = np.array([[0.0, 2.0, 0.0], [1.0, 5.0, -1.0]])
    v0 = np.array([[0.0, 0.0, 0.0], [1.5, 4.0, -0.5]])
    b.add_particles(x0, v0, mass=[1.0, 3.0])
    frames, substeps, dt = 20, 7, 1e-3
    _, out = rollout(b, frames, substeps, dt)
    g = np.array([0.0, -9.8, 0.0])
    for f in range(frames + 1):
        n = f * substeps
        # v_k = v0 + k dt g;  x_n = x0 + n dt v0 + dt^2 g n (n + 1) / 2
        expected = x0 + n * dt * v0 + dt * dt * g * n * (n + 1) / 2
        np.testing.assert_allclose(out[f], expected, rtol=0, atol=1e-12)


def test_pinned_particle_stays_put_even_with_initial_velocity():
    b = gs.ModelBuilder(ground=False)
    b.add_particle((0.0, 1.0, 0.0), velocity=(3.0, 0.0, 0.0), pinned=True)
    _, out = rollout(b, 5, 4, 1e-2)
    np.testing.assert_array_equal(out[-1], out[0])


def _oscillator(k, m, damping, frames, substeps, dt):
    b = gs.ModelBuilder(ground=False, gravity=(0.0, 0.0, 0.0))
    b.add_particle((0.0, 0.0, 0.0), pinned=True)
    b.add_particle((1.1, 0.0, 0.0), mass=m)
    b.add_spring(0, 1, stiffness=k, damping=damping, rest_length=1.0)
    _, out = rollout(b, frames, substeps, dt)
    t = np.arange(frames + 1) * substeps * dt
    return t, out[:, 1, 0] - 1.0


def test_spring_oscillator_period_matches_analytic():
    k, m = 40.0, 0.5
    t, u = _oscillator(k, m, 0.0, 1000, 10, 2e-4)
    crossings = []
    for i in range(len(u) - 1):
        if u[i] > 0 >= u[i + 1]:  # downward zero crossings, linearly interpolated
            crossings.append(t[i] + (t[i + 1] - t[i]) * u[i] / (u[i] - u[i + 1]))
    period = np.mean(np.diff(crossings))
    analytic = 2 * np.pi * np.sqrt(m / k)
    assert len(crossings) >= 3
    assert abs(period - analytic) / analytic < 5e-3


def test_spring_damping_decays_at_analytic_rate():
    k, m, c = 80.0, 0.5, 0.4
    t, u = _oscillator(k, m, c, 1000, 10, 2e-4)
    # Underdamped: amplitude envelope exp(-c t / (2 m)); compare successive maxima.
    peaks = [i for i in range(1, len(u) - 1) if u[i - 1] < u[i] >= u[i + 1] and u[i] > 0]
    assert len(peaks) >= 3
    rates = [np.log(u[a] / u[b]) / (t[b] - t[a]) for a, b in zip(peaks, peaks[1:])]
    assert abs(np.mean(rates) - c / (2 * m)) / (c / (2 * m)) < 0.02


def test_resting_particle_settles_at_mg_over_ke():
    m, ke, r = 0.3, 2e3, 0.01
    b = gs.ModelBuilder(contact_ke=ke, contact_kd=5.0, contact_kf=100.0, particle_radius=r)
    b.add_particle((0.0, r, 0.0), mass=m)
    _, out = rollout(b, 120, 16, 1.0 / 960)
    penetration = r - out[-1, 0, 1]
    assert abs(penetration - m * 9.8 / ke) / (m * 9.8 / ke) < 0.01


def test_sliding_particle_decelerates_at_mu_g():
    mu, r, m = 0.3, 0.01, 1.0
    ke = 1e4
    y_rest = r - m * 9.8 / ke
    b = gs.ModelBuilder(contact_ke=ke, contact_kd=50.0, contact_kf=500.0, contact_mu=mu,
                        particle_radius=r)
    b.add_particle((0.0, y_rest, 0.0), velocity=(3.0, 0.0, 1.0), mass=m)
    frames, substeps, dt = 30, 16, 1.0 / 960
    _, out = rollout(b, frames, substeps, dt)
    h = substeps * dt
    xz = out[:, 0, [0, 2]]
    speed = np.linalg.norm(np.diff(xz, axis=0), axis=1) / h
    decel = -np.diff(speed) / h
    # once sliding (skip the first frames while the normal force settles)
    assert np.all(speed[5:] > 0.5)
    np.testing.assert_allclose(np.mean(decel[5:]), mu * 9.8, rtol=0.02)
    # friction opposes the velocity: the direction of travel does not change
    d0 = xz[2] - xz[1]
    d1 = xz[-1] - xz[-2]
    assert np.dot(d0, d1) / np.linalg.norm(d0) / np.linalg.norm(d1) > 1 - 1e-6


@pytest.mark.precision("f32")
def test_float32_rollout_matches_float64_closed_form():
    b = gs.ModelBuilder(ground=False)
    b.add_particle((0.0, 2.0, 0.0), velocity=(1.0, 2.0, 0.0))
    frames, substeps, dt = 10, 8, 1e-3
    _, out = rollout(b, frames, substeps, dt)
    assert out.dtype == np.float32
    n = frames * substeps
    expected = np.array([n * dt, 2.0 + n * dt * 2.0 - 9.8 * dt * dt * n * (n + 1) / 2, 0.0])
    np.testing.assert_allclose(out[-1, 0], expected, rtol=1e-5)
