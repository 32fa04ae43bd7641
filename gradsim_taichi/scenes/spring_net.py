"""The spring net: the built-in scene of ``gradsim-taichi simulate``."""

import numpy as np

from gradsim_taichi.builder import ModelBuilder


def spring_net_builder(n: int = 10, size: float = 0.5, height: float = 0.6):
    """An ``n x n`` net of particles and springs (edges and diagonals), tilted, falling
    onto the ground. Returns the builder and the spring pairs ``[S, 2]`` (for drawing)."""
    b = ModelBuilder(contact_ke=3e3, contact_kd=5.0, contact_kf=5.0, contact_mu=0.5)
    u, w = np.meshgrid(np.linspace(0, size, n), np.linspace(0, size, n), indexing="ij")
    pos = np.stack([u, height + 0.3 * u, w], axis=-1).reshape(-1, 3)
    b.add_particles(pos, velocities=(0.5, 0.0, 0.0), mass=0.02)
    idx = np.arange(n * n).reshape(n, n)
    pairs = [np.stack([idx[:-1, :], idx[1:, :]], -1), np.stack([idx[:, :-1], idx[:, 1:]], -1),
             np.stack([idx[:-1, :-1], idx[1:, 1:]], -1), np.stack([idx[1:, :-1], idx[:-1, 1:]], -1)]
    pairs = np.concatenate([p.reshape(-1, 2) for p in pairs])
    b.add_springs(pairs, stiffness=200.0, damping=0.2)
    return b, pairs
