"""benchmarks/foreign_targets.py and foreign_engines.py: the camera conversions to
Mitsuba and PyBullet project like our Camera (analytically, and where the engines are
installed, by their own renders), and the script runs --help without them and exits 2
naming the extra."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

BENCH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks")
sys.path.insert(0, BENCH)

import foreign_engines as fe  # noqa: E402
import foreign_targets as ft  # noqa: E402

from gradsim_taichi.render import Camera, Mesh, SoftRasterizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# a non-square image and an oblique camera: fov, aspect and look-at all matter
CAM = dict(eye=(0.3, 0.8, 1.9), target=(-0.1, 0.2, 0.05), fov_y_deg=38.0, width=24,
           height=16, near=0.1, far=10.0)


def ours(cam=CAM):
    return Camera.look_at(cam["eye"], cam["target"], fov_y_deg=cam["fov_y_deg"],
                          width=cam["width"], height=cam["height"], near=cam["near"],
                          far=cam["far"])


def points(n=50, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform([-0.6, -0.1, -0.6], [0.6, 0.7, 0.6], (n, 3))


def our_uv(pts, cam=CAM):
    uv, depth = ours(cam).project(torch.as_tensor(pts, dtype=torch.float64))
    assert (depth > 0).all()
    return uv.numpy()


def test_tinyrenderer_pixels_match_our_projection_after_half_pixel():
    cam = fe.camera_dict(**CAM)
    pts = points()
    uv = our_uv(pts)
    # TinyRenderer samples pixel (col, row) at exactly (col, row); ours at the centre
    assert np.abs(fe.tinyrenderer_pixels(cam, pts) + 0.5 - uv).max() < 1e-6
    # PyBullet's own matrices (unshifted) put them half a pixel off in each axis
    off = fe.tinyrenderer_pixels(cam, pts, half_pixel=False) + 0.5 - uv
    assert np.allclose(off, [0.5, -0.5], atol=1e-6)


def test_mitsuba_projection_matches_our_camera():
    cam = fe.camera_dict(**CAM)
    pts = points(seed=1)
    assert np.abs(fe.mitsuba_project(cam, pts) - our_uv(pts)).max() < 1e-6


def test_moved_eye_is_three_percent_off_and_perpendicular():
    from types import SimpleNamespace

    scene = SimpleNamespace(camera_eye=CAM["eye"], camera_target=CAM["target"],
                            fov_y_deg=40.0, width=8, height=8, near=0.1, far=10.0)
    eye, target = np.array(CAM["eye"]), np.array(CAM["target"])
    moved = np.array(fe.moved_eye(scene, 0.03))
    step = moved - eye
    dist = np.linalg.norm(target - eye)
    assert np.linalg.norm(step) == pytest.approx(0.03 * dist, rel=1e-12)
    assert abs(step @ (target - eye)) < 1e-12 * dist**2


def test_rotation_to_pybullet_quaternion_round_trip():
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        R = fe._quat_matrix(q)  # (w, x, y, z)
        xyzw = np.array(fe._matrix_quat_xyzw(R))
        assert np.allclose(fe._quat_matrix([xyzw[3], *xyzw[:3]]), R, atol=1e-12)


def test_pybullets_body_damping_is_ours_at_its_coefficients():
    """PyBullet damps every body by default (linearDamping = angularDamping = 0.04): ours
    with linear_damping = linear_drag = angular_damping = angular_drag = 0.04 is the same
    law. A box thrown and spun about a principal axis, no gravity, 1 s at 240 Hz: the
    velocities and position equal PyBullet's (the undamped ones are 10-22% off)."""
    p = pytest.importorskip("pybullet")
    import gradsim_taichi as gs
    from gradsim_taichi import runtime
    from gradsim_taichi.scenes.scene_file_schema import PYBULLET_DAMPING

    extents, mass, v0, w0 = (0.4, 0.2, 0.3), 2.0, [1.5, -0.5, 0.8], [0.0, 0.0, 6.0]
    c = p.connect(p.DIRECT)
    try:
        p.setGravity(0, 0, 0, physicsClientId=c)
        p.setTimeStep(1 / 240, physicsClientId=c)
        shape = p.createCollisionShape(p.GEOM_BOX, halfExtents=[e / 2 for e in extents],
                                       physicsClientId=c)
        box = p.createMultiBody(mass, shape, physicsClientId=c)
        p.resetBaseVelocity(box, v0, w0, physicsClientId=c)
        for _ in range(240):
            p.stepSimulation(physicsClientId=c)
        theirs = [*p.getBaseVelocity(box, physicsClientId=c),
                  p.getBasePositionAndOrientation(box, physicsClientId=c)[0]]
    finally:
        p.disconnect(c)
    theirs = np.concatenate(theirs)
    runtime.ensure_init()
    for damping, close in ((PYBULLET_DAMPING, True), (dict.fromkeys(PYBULLET_DAMPING, 0.0),
                                                       False)):
        b = gs.ModelBuilder(ground=False, gravity=(0.0, 0.0, 0.0))
        b.add_rigid_box(extents, mass=mass, velocity=v0, angular_velocity=w0,
                        **damping)
        sim = gs.Simulation(b.finalize(), frames=4, substeps=60, dt=1 / 240)
        sim.forward()
        st = sim.model.systems[-1].body_states()
        mine = np.concatenate([st[k][-1, 0] for k in ("velocity", "angular_velocity",
                                                      "position")])
        err = np.abs(mine - theirs).max() / np.abs(theirs).max()
        assert (err < 1e-6) if close else (err > 0.05), (damping, err)


def _triangle():
    # a triangle in front of the camera, vertices off the pixel centres
    v = np.array([[-0.55, -0.05, 0.1], [0.5, 0.1, -0.3], [0.05, 0.75, 0.05]])
    return v, np.array([[0, 1, 2]])


def _our_silhouette(v, faces):
    r = SoftRasterizer(ours(), [Mesh(faces, lit=False)], lights=[], mode="hard")
    with torch.no_grad():
        return r(torch.as_tensor(v[None], dtype=torch.float64))[0, ..., 3].numpy() > 0.5


def test_matrices_equal_pybullets_own():
    p = pytest.importorskip("pybullet")
    cam = fe.camera_dict(**CAM)
    view = p.computeViewMatrix(CAM["eye"], CAM["target"], [0, 1, 0])
    proj = p.computeProjectionMatrixFOV(CAM["fov_y_deg"], CAM["width"] / CAM["height"],
                                        CAM["near"], CAM["far"])
    assert np.allclose(fe.pybullet_view_matrix(cam).T.ravel(), view, atol=1e-6)
    assert np.allclose(fe.pybullet_projection_matrix(cam, half_pixel=False).T.ravel(), proj,
                       atol=1e-6)


def test_tinyrenderer_silhouette_equals_ours():
    p = pytest.importorskip("pybullet")
    cam = fe.camera_dict(**CAM)
    v, faces = _triangle()
    cid = p.connect(p.DIRECT)
    try:
        vs = p.createVisualShape(p.GEOM_MESH, vertices=v.tolist(),
                                 indices=[0, 1, 2, 0, 2, 1], physicsClientId=cid)
        body = p.createMultiBody(0, -1, vs, physicsClientId=cid)
        _, _, _, _, seg = p.getCameraImage(
            cam["width"], cam["height"], fe.pybullet_view_matrix(cam).T.ravel().tolist(),
            fe.pybullet_projection_matrix(cam).T.ravel().tolist(),
            renderer=p.ER_TINY_RENDERER, physicsClientId=cid)
    finally:
        p.disconnect(cid)
    seg = np.reshape(np.asarray(seg), (cam["height"], cam["width"])) == body
    sil = _our_silhouette(v, faces)
    assert sil.sum() > 30
    assert (seg == sil).all()


def test_mitsuba_silhouette_equals_ours():
    mi = pytest.importorskip("mitsuba")
    mi.set_variant("scalar_rgb")
    cam = fe.camera_dict(**CAM)
    v, faces = _triangle()
    scene = mi.load_dict({"type": "scene", "integrator": {"type": "path", "max_depth": 2},
                          "sensor": fe.mitsuba_sensor(cam, centre_samples=True),
                          "tri": fe._mitsuba_mesh("tri", v, faces, [[0.5, 0.5, 0.5]])})
    alpha = np.array(mi.render(scene, spp=1))[..., 3]
    sil = _our_silhouette(v, faces)
    assert sil.sum() > 30
    assert ((alpha > 0.5) == sil).all()


def _run_script(args, block_extras):
    """The script in a fresh interpreter; with ``block_extras`` importing mitsuba or
    pybullet fails there (as when the extra is not installed)."""
    block = ("import sys; sys.modules['mitsuba'] = None; sys.modules['pybullet'] = None; "
             if block_extras else "import sys; ")
    code = (block + f"sys.argv = ['foreign_targets.py'] + {args!r}; import runpy; "
            f"runpy.run_path({os.path.join(BENCH, 'foreign_targets.py')!r}, "
            "run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_help_runs_without_the_extras():
    r = _run_script(["--help"], block_extras=True)
    assert r.returncode == 0, r.stderr
    assert "--save-targets" in r.stdout and "--quick" in r.stdout


def test_missing_extra_exits_2_naming_it():
    r = _run_script(["--cases", "mitsuba,pybullet", "--quick"], block_extras=True)
    assert r.returncode == 2
    assert "[bench]" in r.stderr and "mitsuba" in r.stderr and "pybullet" in r.stderr


def test_every_case_has_a_maker_and_an_engine():
    assert set(ft.CASES) == set(ft.TARGET_MAKERS)
    assert ft.CASES["mitsuba-camera"]["engine"] == "mitsuba"
    r = _run_script(["--cases", "mitsuba-camera", "--quick"], block_extras=True)
    assert r.returncode == 2 and "mitsuba" in r.stderr


def test_the_command_defaults_option_is_what_the_command_uses():
    """``the command's defaults`` measures what ``estimate --target`` runs: the kinds,
    loss and iterations of the command for a video the engine did not make."""
    from runtime_arch import TEST_ARCH

    import gradsim_taichi as gs
    from gradsim_taichi.scenes import make_scene

    gs.init(arch=TEST_ARCH, precision="f64")
    scene = make_scene("rigid-mass", frames=2, width=8, height=8)
    scene.build()
    kw = ft.command_defaults(scene)
    assert kw == dict(_render_mode="antialias", loss="robust", iters=160,
                      fit=("background", "appearance", "shadow", "bounce", "blur",
                           "response"))
    assert ft.command_defaults(scene, "camera")["fit"] == ("camera", *kw["fit"])


@pytest.mark.slow
def test_camera_case_end_to_end(tmp_path):
    # the camera case needs no extra: a moved camera's target, the defaults and the
    # fit options (run once estimate(fit=...) exists, else reported as not available)
    out = tmp_path / "rows.json"
    r = _run_script(["--cases", "camera", "--quick", "--options", "defaults;fit=camera",
                     "--json", str(out), "--save-targets", str(tmp_path)], block_extras=True)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    data = json.loads(out.read_text())
    (target,) = data["targets"]
    assert target["render_mse_vs_ours"] > 0  # the moved camera's video is not ours
    rows = {row["option"]: row for row in data["rows"]}
    assert rows["defaults"]["status"] == "done"
    assert 0 <= rows["defaults"]["rel_err"]["mass"] < 0.5
    assert rows["fit=camera"]["status"] in ("done", ft.NA)
    assert (tmp_path / "camera-box-4kg.mp4").exists()
    assert np.load(tmp_path / "camera-box-4kg.npy").shape == (25, 64, 64, 3)


def test_soft_sun_gives_the_directional_lights_irradiance():
    # lighting "soft": a far sphere 3 degrees in radius instead of the directional
    # light; a grey plane facing it is lit alike (Mitsuba's radiance of a diffuse
    # surface: albedo E / pi), and differently at another irradiance
    mi = pytest.importorskip("mitsuba")
    mi.set_variant("scalar_rgb")
    cam = fe.camera_dict(eye=(0.0, 2.0, 0.0), target=(0.0, 0.0, 0.0), up=(0.0, 0.0, -1.0),
                         fov_y_deg=30.0, width=8, height=8)
    plane = fe._mitsuba_mesh("plane", np.array([[-2, 0, -2], [2, 0, -2], [2, 0, 2], [-2, 0, 2.0]]),
                             [[0, 2, 1], [0, 3, 2]], [[0.5, 0.5, 0.5]] * 2)

    def radiance(sun):
        scene = mi.load_dict({"type": "scene", "integrator": {"type": "path", "max_depth": 2},
                              "sensor": fe.mitsuba_sensor(cam, 64), "plane": plane, "sun": sun})
        return float(np.array(mi.render(scene, spp=64))[..., :3].mean())

    down = (0.0, -1.0, 0.0)
    sharp = radiance(fe._sun(down, 2.0, 0.0))
    assert abs(sharp - 0.5 * 2.0 / np.pi) < 1e-3
    assert abs(radiance(fe._sun(down, 2.0, 3.0)) / sharp - 1.0) < 0.02
    assert abs(radiance(fe._sun(down, 1.0, 3.0)) / sharp - 0.5) < 0.01


def test_mp4_round_trip_is_the_users_clip():
    """--mp4: the target as our writer and load_video give it back (odd sizes cropped
    back), equal to saving and loading it by hand."""
    import tempfile
    from pathlib import Path

    from gradsim_taichi.render import load_video, save_video

    rng = np.random.default_rng(0)
    # colour per 2 x 2 block: 4:2:0 keeps most of it
    frames = rng.uniform(0.1, 0.9, (3, 5, 6, 3)).repeat(2, 1).repeat(2, 2)[:, :9, :11]
    back = ft.mp4_round_trip(frames, fps=30)
    assert back.shape == frames.shape
    with tempfile.TemporaryDirectory() as tmp:
        ref = load_video(save_video(frames, Path(tmp) / "c.mp4", fps=30)).numpy()
    np.testing.assert_array_equal(back, ref[:, :9, :11])
    assert 0 < np.abs(back - frames).mean() < 0.03  # a codec's loss, not another clip
