"""Float64 central finite-difference checks of Simulation gradients."""

import numpy as np


def fd_check_params(sim, names, output_weights, eps=1e-6, rtol=1e-5, seed=0, system="particles"):
    """For every name: compare the directional derivative of
    L = sum(w * outputs[system]) along a random direction with sim.backward's gradient.

    Returns {name: (analytic, numeric)}; asserts relative error < rtol for each.
    """
    rng = np.random.default_rng(seed)
    base = {n: sim.get_param(n).copy() for n in names}

    def loss():
        out = sim.forward()[system]
        return float(np.sum(output_weights * out))

    for n in names:
        sim.set_param(n, base[n])
    loss()
    sim.backward({system: output_weights})
    grads = {n: sim.param_grad(n) for n in names}
    results = {}
    for n in names:
        direction = rng.standard_normal(base[n].shape)
        scale = max(np.abs(base[n]).max(), 1e-3)
        h = eps * scale
        sim.set_param(n, base[n] + h * direction)
        lp = loss()
        sim.set_param(n, base[n] - h * direction)
        lm = loss()
        sim.set_param(n, base[n])
        numeric = (lp - lm) / (2 * h)
        analytic = float(np.sum(grads[n] * direction))
        results[n] = (analytic, numeric)
        err = abs(analytic - numeric) / max(abs(numeric), 1e-12)
        assert err < rtol, f"{n}: analytic {analytic:.10g} vs finite difference {numeric:.10g}"
    return results
