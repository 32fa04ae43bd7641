"""How sure an estimate is: a local Gauss-Newton uncertainty and the parameter
combinations the video does not determine.

At the estimate ``u`` (the learned coordinates: log-values for positive parameters) the
residuals ``r`` (rendered minus target pixels over every frame, unblurred) have the
Jacobian ``J = dr/du``, built from central finite differences (forward simulations only,
two per column). With ``m`` residuals and ``k`` columns the noise variance is estimated
as ``s^2 = |r|^2 / (m - k)`` and the covariance of ``u`` as ``s^2 (J^T J)^-1`` (the
Gauss-Newton approximation of the loss Hessian). Positive parameters get the interval
``exp(u +- 1.96 std_u)`` (never below zero) and the standard deviation ``value * std_u``;
the others ``value +- 1.96 std``.

Cost: ``2 k`` simulations and renders. Up to :data:`MAX_COLUMNS` unknowns ``k`` is the
number of unknowns; a parameter with more elements (a per-particle field) is assessed
within its ``ParamSpec.basis`` (e.g. a ball's uniform density, a cloth's affine velocity
fields), so its per-element deviations from that subspace are not (said in the result).

Many unknowns (more than :data:`MAX_COLUMNS`, e.g. a per-particle mass field): besides
the basis-reduced interval, the spectrum of ``J^T J`` over *every* unknown is explored by
:data:`LANCZOS_STEPS` steps of Lanczos on Gauss-Newton products ``J^T J v`` (``J v`` by
central differences: two simulations; ``J^T`` by one reverse pass through the simulator
and renderer), about ``3 * LANCZOS_STEPS`` simulations in all (a few L-BFGS iterations).
The leading curvatures and how many directions the video determines go in
``spectrum``; the weakest direction found is reported like those below.

Identifiability: the eigenvectors of ``J^T J`` whose curvature is below
:data:`FLAT_CURVATURE` times the largest, or whose standard deviation exceeds
:data:`LOOSE_STD` in learned coordinates (a factor ``e`` for a positive parameter), are
combinations the video does not pin down; each is reported with its leading components.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from gradsim_taichi import runtime
from gradsim_taichi.optimisers import fd_jacobian

MAX_COLUMNS = 32
LANCZOS_STEPS = 8
FLAT_CURVATURE = 1e-8
LOOSE_STD = 1.0
Z95 = 1.959963984540054


def local_uncertainty(fit) -> dict:
    """The uncertainty of an estimation's current values (an ``fit.Fit`` after
    its run). Returns a dict (JSON-ready): ``params`` (per name: ``std``, ``ci95``),
    ``sigma`` (residual noise level), ``dof``, ``condition`` (of ``J^T J``),
    ``weak_directions`` (each ``{"curvature", "std", "components": {label: weight}}``),
    ``warnings``, ``method``; or ``{"skipped": why}``.

    With nuisance parameters (``estimate(fit=...)``) their free elements are columns of
    the Jacobian too, so ``std`` and ``ci95`` hold for the nuisance values unknown as
    well (a camera that trades against the mass widens the mass's interval, and the
    trade is named among the weak directions); ``std_nuisance_held`` is each physical
    parameter's std were the nuisance values known, and ``nuisance`` lists the columns.
    A strength at its bound (0 or 1) is held there (an active constraint), and beyond
    :data:`MAX_COLUMNS` columns in all every nuisance value is held."""
    t0 = time.perf_counter()
    tensors = [fit.u[n] for n in fit.names]
    x0 = _flat(tensors)
    columns, labels, note = _columns(fit, x0)
    extra, extra_sel, extra_labels = _free_nuisance(fit)
    kp = len(x0) if columns is None else columns.shape[1]
    if labels is None or not extra_labels or kp + len(extra_labels) > MAX_COLUMNS:
        extra, extra_sel, extra_labels = [], None, []
    xn0 = _flat(extra)
    basis = np.eye(len(x0)) if columns is None else columns.cpu().numpy()
    if extra_labels:
        basis = np.block([[basis, np.zeros((len(x0), len(extra_labels)))],
                          [np.zeros((len(xn0), kp)), extra_sel]])
        labels = labels + extra_labels

    def evaluate_over(ts):
        def evaluate(x):
            _set(ts, x)
            r = fit.raw_residuals()
            return None if r is None else r.detach().reshape(-1).to(torch.float64)
        return evaluate

    try:
        r0 = evaluate_over(tensors)(x0)
        if r0 is None or not bool(torch.isfinite(r0).all()):
            return {"skipped": "the model is not finite at the estimate"}
        spectrum = None
        if len(x0) > MAX_COLUMNS:
            spectrum = _spectrum(fit, tensors, x0, r0, evaluate_over(tensors))
        if labels is None:
            return _spectrum_only(fit, spectrum, note, t0)
        jac = fd_jacobian(evaluate_over(tensors + extra), torch.cat([x0, xn0]), r0,
                          torch.as_tensor(basis, device=x0.device))
    finally:
        _set(tensors, x0)
        _set(extra, xn0)
    m, k = jac.shape
    dof = max(m - k, 1)
    sigma = math.sqrt(float(r0 @ r0) / dof)
    a = (jac.T @ jac).cpu().numpy()
    w, v = np.linalg.eigh(a)
    top = max(float(w[-1]), 1e-300)
    # pseudo-inverse: numerically flat directions carry no (finite) variance here; they
    # are reported as weak directions instead
    keep = w > FLAT_CURVATURE * top
    std_x = _std(basis, sigma ** 2 * (v[:, keep] / w[keep]) @ v[:, keep].T)
    # ... so the elements along one are undetermined (NaN), not as certain as the
    # pseudo-inverse's zero there would say
    for j in np.flatnonzero(~keep):
        part = np.abs(basis @ v[:, j])
        if part.max() > 0:
            std_x[part >= 0.1 * part.max()] = np.nan
    held = None
    if extra_labels:  # the physical block alone: the nuisance values known
        wp, vp = np.linalg.eigh(a[:kp, :kp])
        kept = wp > FLAT_CURVATURE * max(float(wp[-1]), 1e-300)
        held = _std(basis[:len(x0), :kp], sigma ** 2 * (vp[:, kept] / wp[kept]) @ vp[:, kept].T)
    flat_std = ~keep
    nuisance_note = (f"; nuisance values free ({len(extra_labels)} columns)"
                     if extra_labels else "")
    out = {"params": {}, "sigma": sigma, "dof": int(dof),
           "condition": float(top / max(float(w[0]), 1e-300)) if w[0] > 0 else math.inf,
           "method": f"Gauss-Newton, finite-difference Jacobian ({k} columns, {2 * k} "
                     f"simulations){'; ' + note if note else ''}{nuisance_note}",
           "weak_directions": [], "warnings": []}
    if extra_labels:
        out["nuisance"] = extra_labels
    i = 0
    for n, t in zip(fit.names, tensors):
        size = t.numel()
        u = x0[i: i + size].cpu().numpy().reshape(t.shape)
        untouched = (np.abs(basis[i: i + size]).sum(axis=1) == 0).reshape(t.shape)
        out["params"][n] = _interval(u, std_x[i: i + size].reshape(t.shape), untouched,
                                     fit.specs[n].positive)
        if held is not None:
            out["params"][n]["std_nuisance_held"] = _interval(
                u, held[i: i + size].reshape(t.shape), untouched,
                fit.specs[n].positive)["std"]
        i += size
    for j in range(len(w)):
        std_dir = sigma / math.sqrt(w[j]) if w[j] > 0 else math.inf
        if flat_std[j] or std_dir > LOOSE_STD:
            comp = v[:, j]
            order = np.argsort(-np.abs(comp))[:4]
            components = {labels[q]: round(float(comp[q]), 3) for q in order
                          if abs(comp[q]) >= 0.1 * abs(comp[order[0]])}
            out["weak_directions"].append({"curvature": float(w[j]), "std": std_dir,
                                           "components": components})
            out["warnings"].append(_describe(components))
    if spectrum is not None:
        _add_spectrum(out, spectrum, sigma)
    out["seconds"] = time.perf_counter() - t0
    return out


def _std(basis, cov_c):
    """Standard deviations of the elements from the covariance of the columns' weights."""
    return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", basis, cov_c, basis), 0.0))


def _interval(u, s, untouched, positive) -> dict:
    """``std`` and ``ci95`` of a parameter from its learned coordinates ``u`` and their
    standard deviations ``s`` (log-values for a positive parameter)."""
    if positive:
        value = np.exp(u)
        std, ci = value * s, [np.exp(u - Z95 * s), np.exp(u + Z95 * s)]
    else:
        std, ci = s, [u - Z95 * s, u + Z95 * s]
    std = np.where(untouched, np.nan, std)
    return {"std": _plain(std), "ci95": [_plain(ci[0]), _plain(ci[1])]}


def _free_nuisance(fit):
    """The nuisance tensors, the selection ``[elements, free]`` of their free elements
    (:meth:`~gradsim_taichi.nuisance.Nuisance.free`: a value at its bound, or a sharp
    blur, is held) and those elements' labels."""
    nuisance = getattr(fit, "nuisance", None)
    if nuisance is None or not nuisance.params:  # (background alone: solved, not learned)
        return [], None, []
    tensors, free, labels = [], [], []
    for n, t in nuisance.params.items():
        ok = nuisance.free(n).cpu().numpy()
        tensors.append(t)
        free.append(ok)
        labels += [n if len(ok) == 1 else f"{n}[{e}]" for e in range(len(ok)) if ok[e]]
    free = np.concatenate(free)
    return tensors, np.eye(len(free))[:, free], labels


def _flat(tensors) -> torch.Tensor:
    if not tensors:
        return torch.zeros(0, dtype=torch.float64, device=runtime.torch_device())
    return torch.cat([t.detach().reshape(-1) for t in tensors]).to(torch.float64)


# ---- many unknowns: Lanczos on Gauss-Newton products ---------------------------------
def gauss_newton_product(fit, tensors, x0, r0, evaluate):
    """``v -> J^T J v`` at ``x0`` over every learned element: ``J v`` by central
    differences along ``v`` (two simulations), then ``J^T`` by one reverse pass."""
    ids = fit.fitted_ids()

    def product(v):
        jv = fd_jacobian(evaluate, x0, r0, v.reshape(-1, 1))[:, 0]
        _set(tensors, x0)
        pred = fit.predict(ids)
        r = (pred - fit.target[ids]).reshape(-1)
        grads = torch.autograd.grad(r, tensors, jv.to(r.dtype), allow_unused=True)
        return torch.cat([torch.zeros(t.numel(), dtype=torch.float64, device=t.device)
                          if g is None
                          else g.detach().reshape(-1).to(torch.float64)
                          for g, t in zip(grads, tensors)])

    return product


def lanczos(product, n: int, steps: int, seed: int = 0):
    """Ritz values (descending) and vectors ``[n, k]`` of a symmetric positive
    semi-definite operator after ``k <= steps`` Lanczos steps from a seeded random start,
    with full re-orthogonalisation (k is small)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, generator=g, dtype=torch.float64).to(runtime.torch_device())
    basis = [q / q.norm()]
    alphas, betas = [], []
    for _ in range(min(steps, n)):
        w = product(basis[-1])
        alphas.append(float(basis[-1] @ w))
        qs = torch.stack(basis, 1)
        for _ in range(2):  # twice is enough (Kahan)
            w = w - qs @ (qs.T @ w)
        beta = float(w.norm())
        if beta <= 1e-12 * max(abs(a) for a in alphas) or len(basis) == n:
            break
        betas.append(beta)
        basis.append(w / beta)
    k = len(alphas)
    t = np.diag(alphas) + np.diag(betas[: k - 1], 1) + np.diag(betas[: k - 1], -1)
    theta, y = np.linalg.eigh(t)
    order = np.argsort(-theta)
    vectors = torch.stack(basis[:k], 1).cpu().numpy() @ y[:, order]
    return np.maximum(theta[order], 0.0), vectors


def _spectrum(fit, tensors, x0, r0, evaluate) -> dict:
    product = gauss_newton_product(fit, tensors, x0, r0, evaluate)
    theta, vectors = lanczos(product, len(x0), LANCZOS_STEPS)
    labels = [n if t.numel() == 1 else f"{n}[{e}]" for n, t in zip(fit.names, tensors)
              for e in range(t.numel())]
    return {"theta": theta, "vectors": vectors, "labels": labels, "r0": r0,
            "unknowns": len(x0)}


def _add_spectrum(out: dict, spectrum: dict, sigma: float) -> None:
    """The spectrum's summary into ``out`` (JSON-ready), and its weakest direction found
    as a weak direction when the video does not pin it down."""
    theta, vectors, labels = spectrum["theta"], spectrum["vectors"], spectrum["labels"]
    k, n = len(theta), spectrum["unknowns"]
    top = max(float(theta[0]), 1e-300)
    std = np.array([sigma / math.sqrt(t) if t > 0 else math.inf for t in theta])
    determined = int(np.sum((theta > FLAT_CURVATURE * top) & (std <= LOOSE_STD)))
    out["spectrum"] = {
        "unknowns": n, "products": k, "curvatures": [float(t) for t in theta],
        "std": [float(x) for x in std], "determined_of_found": determined,
        "method": f"Lanczos on Gauss-Newton products J^T J v over all {n} unknowns ({k} "
                  f"products, {3 * k} simulations); Ritz values bound the leading "
                  "curvatures from below"}
    if determined < k:
        comp = vectors[:, -1]
        order = np.argsort(-np.abs(comp))[:4]
        components = {labels[q]: round(float(comp[q]), 3) for q in order
                      if abs(comp[q]) >= 0.1 * abs(comp[order[0]])}
        out["weak_directions"].append({"curvature": float(theta[-1]), "std": float(std[-1]),
                                       "components": components})
        out["warnings"].append(_describe(components))
    out["spectrum"]["note"] = (
        f"{n} unknowns: {k} Gauss-Newton products found {determined} directions the video "
        f"determines; the other {n - determined} combinations were not resolved (a video "
        "may leave most per-element values undetermined)")


def _spectrum_only(fit, spectrum: dict, note: str, t0: float) -> dict:
    """Too many unknowns for a dense Jacobian even within the bases: no per-parameter
    interval, only the spectrum and the weak directions."""
    r0, theta = spectrum["r0"], spectrum["theta"]
    top = max(float(theta[0]), 1e-300)
    rank = int(np.sum(theta > FLAT_CURVATURE * top))
    dof = max(len(r0) - rank, 1)
    sigma = math.sqrt(float(r0 @ r0) / dof)
    out = {"params": {n: {"std": None, "ci95": None} for n in fit.names}, "sigma": sigma,
           "dof": int(dof), "condition": None, "method": note + "; spectrum only",
           "weak_directions": [], "warnings": []}
    _add_spectrum(out, spectrum, sigma)
    out["seconds"] = time.perf_counter() - t0
    return out


def _columns(fit, x0):
    """Directions the Jacobian is built along (None: every coordinate), their labels, and
    a note on what was left out; ``(None, None, why)`` when there are too many."""
    sizes = [fit.u[n].numel() for n in fit.names]
    if sum(sizes) <= MAX_COLUMNS:
        labels = [n if size == 1 else f"{n}[{e}]" for n, size in zip(fit.names, sizes)
                  for e in range(size)]
        return None, labels, ""
    blocks, labels, reduced = [], [], []
    for n, size in zip(fit.names, sizes):
        basis = fit.specs[n].basis
        if size > 1 and basis is not None:
            q = np.asarray(basis, dtype=np.float64).reshape(size, -1)
            blocks.append(q)
            labels += [f"{n}:basis[{c}]" for c in range(q.shape[1])]
            reduced.append(n)
        else:
            blocks.append(np.eye(size))
            labels += [n if size == 1 else f"{n}[{e}]" for e in range(size)]
    k = sum(b.shape[1] for b in blocks)
    if k > MAX_COLUMNS:
        return None, None, (f"{sum(sizes)} unknowns ({k} after bases), more than "
                            f"{MAX_COLUMNS}: no per-parameter interval")
    columns = np.zeros((sum(sizes), k))
    r = c = 0
    for b in blocks:
        columns[r: r + b.shape[0], c: c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    note = (f"{', '.join(reduced)} assessed within {'its' if len(reduced) == 1 else 'their'}"
            " basis only")
    return torch.as_tensor(columns, device=x0.device), labels, note


def _describe(components: dict) -> str:
    names = list(components)
    weights = ", ".join(f"{w:+.2f}" for w in components.values())
    if len(names) == 1:
        return (f"the video does not determine {names[0]} (its curvature is flat or its "
                "interval spans more than a factor e)")
    return (f"the video does not determine {', '.join(names[:-1])} and {names[-1]} "
            f"separately: they trade off along ({weights})")


def _set(tensors, x) -> None:
    with torch.no_grad():
        i = 0
        for t in tensors:
            t.copy_(x[i: i + t.numel()].reshape(t.shape).to(t.dtype))
            i += t.numel()


def _plain(x):
    arr = np.asarray(x, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr.tolist()
