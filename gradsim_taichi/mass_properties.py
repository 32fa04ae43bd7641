"""Mass, centre of mass and inertia tensor of a closed triangle mesh (uniform density).

Uses the divergence theorem: the solid is the signed sum of the tetrahedra spanned by
the origin and each outward-facing triangle, whose volume and second moments have
closed forms (Tonon 2004 / Eberly). Exact for the polyhedron the mesh describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class MassProperties:
    """Mass properties of a solid in its mesh frame.

    Attributes:
        mass: kg.
        volume: m^3.
        density: kg/m^3.
        com: centre of mass (3,), mesh frame.
        inertia: inertia tensor (3, 3) about the centre of mass, mesh axes [kg m^2].
    """

    mass: float
    volume: float
    density: float
    com: np.ndarray
    inertia: np.ndarray


def check_watertight(faces: np.ndarray, name: str = "mesh") -> None:
    """Raise ValueError unless every edge is shared by exactly two faces with opposite
    orientation (closed, consistently wound, manifold)."""
    faces = np.asarray(faces, dtype=np.int64)
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    und = np.sort(directed, axis=1)
    _, inv, counts = np.unique(und, axis=0, return_inverse=True, return_counts=True)
    bad = np.nonzero(counts != 2)[0]
    if len(bad):
        e = und[np.nonzero(inv.ravel() == bad[0])[0][0]]
        raise ValueError(
            f"{name} is not watertight: edge ({e[0]}, {e[1]}) is used by {counts[bad[0]]} "
            f"faces (expected 2; {len(bad)} such edges). Rigid bodies need a closed mesh; "
            "repair it first (e.g. trimesh.repair.fill_holes or a convex hull)"
        )
    # Consistent winding: each directed edge must appear once (its twin runs the other way).
    _, dcounts = np.unique(directed, axis=0, return_counts=True)
    if np.any(dcounts != 1):
        raise ValueError(
            f"{name} has inconsistently wound faces (a directed edge appears twice); "
            "fix the winding first (e.g. trimesh.repair.fix_winding)"
        )


def mass_properties(vertices, faces, density=None, mass=None) -> MassProperties:
    """Mass properties of the closed mesh ``(vertices [N, 3], faces [M, 3])``.

    Give exactly one of ``density`` (kg/m^3) or ``mass`` (kg). A mesh wound inward
    (negative volume) is treated as its outward-wound twin. Raises ValueError for open or
    non-manifold meshes, degenerate (zero-volume) meshes and bad densities/masses.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
        raise ValueError(f"vertices must have shape (N>=4, 3); got {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("vertices contain NaN or inf")
    if f.ndim != 2 or f.shape[1] != 3 or len(f) < 4:
        raise ValueError(f"faces must have shape (M>=4, 3); got {f.shape}")
    if f.min() < 0 or f.max() >= len(v):
        raise ValueError(f"faces index vertices out of range [0, {len(v)})")
    if (density is None) == (mass is None):
        raise ValueError("give exactly one of density= or mass=")
    check_watertight(f)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))  # 6 x signed tet volume
    volume = det.sum() / 6.0
    scale = np.abs(v).max() ** 3 + 1e-300
    if abs(volume) <= 1e-12 * scale:
        raise ValueError(f"mesh encloses no volume ({volume:.3g} m^3)")
    s = a + b + c
    first = (det[:, None] * s).sum(0) / 24.0  # integral of x dV
    # integral of x x^T dV over each tet (0, a, b, c) = det/120 (aa'+bb'+cc'+ss')
    outer = (np.einsum("i,ij,ik->jk", det, a, a) + np.einsum("i,ij,ik->jk", det, b, b)
             + np.einsum("i,ij,ik->jk", det, c, c) + np.einsum("i,ij,ik->jk", det, s, s))
    second = outer / 120.0
    if volume < 0:  # inward winding flips every signed integral
        volume, first, second = -volume, -first, -second
    com = first / volume
    if density is not None:
        rho = float(density)
        if not (np.isfinite(rho) and rho > 0):
            raise ValueError(f"density must be > 0; got {density!r}")
    else:
        m = float(mass)
        if not (np.isfinite(m) and m > 0):
            raise ValueError(f"mass must be > 0; got {mass!r}")
        rho = m / volume
    total = rho * volume
    cov = rho * second - total * np.outer(com, com)  # second moment about the COM
    inertia = np.trace(cov) * np.eye(3) - cov
    return MassProperties(total, volume, rho, com, 0.5 * (inertia + inertia.T))
