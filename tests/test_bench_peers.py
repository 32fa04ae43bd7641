"""The peers benchmark (benchmarks/bench_peers.py) without warp or Newton: the shared
topology every engine's model is built from, our model built from it, and a ``--help``
that imports no peer."""

import os
import subprocess
import sys

import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks")
sys.path.insert(0, BENCH)

import bench_peers as bp  # noqa: E402


def test_cloth_topology_counts_and_hinges():
    t = bp.cloth_topology(64)
    x, tris, h = t["x"], t["tris"], t["hinges"]
    assert (len(x), len(tris), len(h)) == (4225, 8192, 12160)
    # every triangle has the same area and normal +y (one winding)
    n = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
    np.testing.assert_allclose(n[:, 1], 1.0 / 64**2, rtol=1e-12)
    np.testing.assert_allclose(n[:, [0, 2]], 0.0, atol=1e-15)
    # each hinge (o0, o1, v0, v1): triangle {o0, v0, v1} runs v0 -> v1, {o1, v0, v1}
    # runs v1 -> v0, both are triangles of the mesh, and every interior edge has one hinge
    directed = {}
    for k, tri in enumerate(tris.tolist()):
        for a, b, o in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
            directed[(tri[a], tri[b])] = (tri[o], k)
    wings = set()
    for o0, o1, v0, v1 in h.tolist():
        assert directed[(v0, v1)][0] == o0
        assert directed[(v1, v0)][0] == o1
        wings.add(frozenset((directed[(v0, v1)][1], directed[(v1, v0)][1])))
    assert len(wings) == len(h)
    interior = {frozenset(e) for e in directed if (e[1], e[0]) in directed}
    assert {frozenset(e[2:]) for e in h.tolist()} == interior


def test_box_topology_counts_volumes_and_mass():
    t = bp.box_topology(12)
    x, tets, mass = t["x"], t["tets"], t["mass"]
    assert (len(x), len(tets)) == (2197, 10368)
    vol = bp.tet_volumes(x, tets)
    assert vol.min() > 0  # every tet positively oriented, none degenerate
    np.testing.assert_allclose(vol.sum(), bp.FEM["size"] ** 3, rtol=1e-12)  # a partition
    np.testing.assert_allclose(mass.sum(), bp.FEM["density"] * bp.FEM["size"] ** 3,
                               rtol=1e-12)
    assert len(np.unique(np.sort(tets, axis=1), axis=0)) == len(tets)  # no duplicates
    # conforming: every interior face is shared by exactly two tets
    faces = np.sort(tets[:, [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]].reshape(-1, 3), 1)
    _, counts = np.unique(faces, axis=0, return_counts=True)
    assert counts.max() == 2
    assert (counts == 1).sum() == 6 * 12 * 12 * 2  # the boundary: 2 triangles per square


@pytest.mark.parametrize("scene", ["cloth", "fem"])
def test_our_model_from_the_topology_runs_a_frame(scene):
    """Lifted 1 m (no contact within the frame) and with a uniform velocity, nothing
    deforms: the frame's substeps are exactly free fall under semi-implicit Euler,
    x_n = x0 + n dt v0 + g dt^2 n (n + 1) / 2."""
    data = bp.scene_data(scene, quick=True)
    data["x"] = data["x"] + np.array([0.0, 1.0, 0.0])
    data["v"] = np.tile([0.3, -1.0, 0.2], (len(data["x"]), 1))
    ours = bp.Ours(scene, data, frames=1, substeps=bp.SUBSTEPS)  # checks the hinge set
    n, dt = bp.SUBSTEPS, ours.sim.dt
    assert dt == pytest.approx(1.0 / (bp.FPS * n))
    x1 = ours.sim.forward()["particles"][1]
    g = np.array([0.0, -9.8, 0.0])
    np.testing.assert_allclose(x1, data["x"] + n * dt * data["v"] + g * dt**2 * n * (n + 1) / 2,
                               rtol=0, atol=1e-12)
    assert ours.sim.model.particle_count == len(data["x"])


def test_help_without_the_peers(tmp_path):
    """--help works where warp and newton cannot be imported, and the core package
    imports neither."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('warp', 'newton'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, _Block())\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    script = os.path.join(BENCH, "bench_peers.py")
    out = subprocess.run([sys.executable, script, "--help"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--quick" in out.stdout and "--json" in out.stdout
    code = ("import gradsim_taichi, sys; "
            "assert not {'warp', 'newton'} & set(sys.modules), sorted(sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    bad = subprocess.run([sys.executable, script, "--scenes", "rope"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown scene" in bad.stderr
    assert "Traceback" not in bad.stderr
