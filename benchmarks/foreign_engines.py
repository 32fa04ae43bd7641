"""The foreign engines of ``foreign_targets.py``: our camera as Mitsuba 3's and
PyBullet's (pure numpy, tested in ``tests/test_foreign_targets.py``), the posed meshes
path traced by Mitsuba (``scalar_rgb``), the rigid-mass preset's body simulated by
PyBullet (``p.DIRECT``) and drawn by its TinyRenderer, and one target maker per case
(``*_target(scene, shape, mass, log) -> (frames, plate)``). The engines are imported
inside the functions that need them (the optional extra ``[bench]``)."""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np

SPP = 64  # Mitsuba samples per pixel
# Mitsuba's lights (foreign_targets.py --lighting): the constant environment's radiance,
# the sun's irradiance as a factor of ours, and the sun's angular radius (degrees; 0: a
# directional light, sharp shadows). "ours" draws exactly our shading model's light;
# the others do not: the image's shading then differs from any the model draws at its
# nominal light (fit "appearance" learns it)
LIGHTINGS = {"ours": (0.5, 1.0, 0.0), "bright": (0.35, 1.4, 0.0), "dim": (0.65, 0.7, 0.0),
             "soft": (0.5, 1.0, 3.0)}
LIGHTING = "ours"
# Mitsuba's reconstruction filter of each pixel's samples: "box" (the pixel's own square,
# what our anti-aliasing integrates), or one of its wider ones ("gaussian", its default:
# a Gaussian of 0.5 px standard deviation over 2 px; "tent", "mitchell", "lanczos"),
# which soften every edge as a real camera's optics and demosaicing do
RFILTERS = ("box", "gaussian", "tent", "mitchell", "lanczos")
RFILTER = "box"
PB_SUBSTEPS = 8  # PyBullet steps per frame (1/480 s at 60 fps)
EYE_SHIFT = 0.03  # the camera case: the eye moved by this fraction of its distance


# ---- cameras: ours -> Mitsuba, ours -> PyBullet (pure numpy, tested) -------------------
def camera_dict(eye, target, fov_y_deg, width, height, near=0.1, far=10.0,
                up=(0.0, 1.0, 0.0)) -> dict:
    """A look-at camera as plain numbers (ours: :meth:`Camera.look_at`)."""
    return dict(eye=np.asarray(eye, float), target=np.asarray(target, float),
                up=np.asarray(up, float), fov_y_deg=float(fov_y_deg), width=int(width),
                height=int(height), near=float(near), far=float(far))


def camera_spec(scene) -> dict:
    """Our look-at camera of ``scene`` as plain numbers; a ValueError when the scene's
    camera is not that look-at camera (a scene file's fx/fy/cx/cy or world_to_camera:
    the foreign renderers here are set up from eye, target and field of view)."""
    from gradsim_taichi.render import Camera

    cam = camera_dict(scene.camera_eye, scene.camera_target, scene.fov_y_deg, scene.width,
                      scene.height, scene.near, scene.far)
    ours = getattr(scene, "camera", None)
    if ours is None:  # (plain numbers, no scene built)
        return cam
    look = Camera.look_at(cam["eye"], cam["target"], cam["up"], cam["fov_y_deg"],
                          cam["width"], cam["height"])
    same = all(float((a.double() - b.double()).abs().max()) < 1e-9 * (1 + float(b.abs().max()))
               for a, b in zip((*ours.world_to_camera(), *ours.intrinsics()),
                               (*look.world_to_camera(), *look.intrinsics())))
    if not same:
        raise ValueError("the scene's camera is not a look-at camera of its eye, target and "
                         "fov_y_deg (fx/fy/cx/cy or world_to_camera given): the foreign "
                         "renderers here take only those; give the camera as eye, target "
                         "and fov_y_deg")
    return cam


def mitsuba_sensor(cam: dict, spp: int = 64, centre_samples: bool = False) -> dict:
    """A Mitsuba ``perspective`` sensor dict matching our camera: the vertical field of
    view (``fov_axis="y"``: ours is vertical whatever the aspect), Mitsuba's look-at
    with the same eye, target and up, pixels filtered by :data:`RFILTER` (the box: over
    ``[j, j + 1]``, their centre is ours, ``j + 0.5``). ``centre_samples``: one sample
    at each pixel's centre (the stratified sampler without jitter, box-filtered), a
    point-sampled image like ours."""
    import mitsuba as mi

    sampler = (dict(type="stratified", sample_count=1, jitter=False) if centre_samples
               else dict(type="independent", sample_count=spp))
    return dict(type="perspective", fov=cam["fov_y_deg"], fov_axis="y",
                near_clip=cam["near"], far_clip=cam["far"],
                to_world=mi.ScalarTransform4f().look_at(origin=cam["eye"].tolist(),
                                                        target=cam["target"].tolist(),
                                                        up=cam["up"].tolist()),
                film=dict(type="hdrfilm", width=cam["width"], height=cam["height"],
                          rfilter=dict(type="box" if centre_samples else RFILTER),
                          pixel_format="rgba"),
                sampler=sampler)


def mitsuba_project(cam: dict, points) -> np.ndarray:
    """Pixel coordinates ``[..., 2]`` (ours: centres at half-integers) of world points as
    Mitsuba's perspective sensor of :func:`mitsuba_sensor` maps them: its look-at frame
    (x = left = up x forward, y = up, z = forward) and its film mapping
    ``u = W (1/2 - x / (2 z tan(fov_x / 2)))``, ``v = H (1/2 - y / (2 z tan(fov_y / 2)))``
    with ``tan(fov_x / 2) = tan(fov_y / 2) W / H`` for ``fov_axis="y"``."""
    p = np.asarray(points, float)
    fwd = cam["target"] - cam["eye"]
    fwd = fwd / np.linalg.norm(fwd)
    left = np.cross(cam["up"], fwd)
    left = left / np.linalg.norm(left)
    up = np.cross(fwd, left)
    d = p - cam["eye"]
    x, y, z = d @ left, d @ up, d @ fwd
    ty = math.tan(math.radians(cam["fov_y_deg"]) / 2)
    tx = ty * cam["width"] / cam["height"]
    u = cam["width"] * (0.5 - 0.5 * x / (z * tx))
    v = cam["height"] * (0.5 - 0.5 * y / (z * ty))
    return np.stack([u, v], -1)


def pybullet_view_matrix(cam: dict) -> np.ndarray:
    """The 4x4 OpenGL view matrix (world -> eye, looking down -z) of our camera; PyBullet
    wants it column-major: ``M.T.ravel()`` (what ``p.computeViewMatrix`` returns)."""
    fwd = cam["target"] - cam["eye"]
    fwd = fwd / np.linalg.norm(fwd)
    side = np.cross(fwd, cam["up"])
    side = side / np.linalg.norm(side)
    up = np.cross(side, fwd)
    M = np.eye(4)
    M[0, :3], M[1, :3], M[2, :3] = side, up, -fwd
    M[:3, 3] = -M[:3, :3] @ cam["eye"]
    return M


def pybullet_projection_matrix(cam: dict, half_pixel: bool = True) -> np.ndarray:
    """The 4x4 OpenGL projection of our camera (``p.computeProjectionMatrixFOV`` with our
    vertical fov, aspect W/H, near, far), and with ``half_pixel`` shifted by half a pixel
    in x and y: TinyRenderer maps NDC to ``x_s = (x + 1) W / 2``, ``y_s = (y + 1) H / 2``
    and samples integer ``(x_s, y_s)`` (image row ``H - 1 - y_s``), ours samples
    pixel centres; shifted, TinyRenderer's pixel ``(col, row)`` sees what ours does."""
    f = 1.0 / math.tan(math.radians(cam["fov_y_deg"]) / 2)
    n, fa = cam["near"], cam["far"]
    P = np.zeros((4, 4))
    P[0, 0] = f * cam["height"] / cam["width"]
    P[1, 1] = f
    P[2, 2] = (fa + n) / (n - fa)
    P[2, 3] = 2 * fa * n / (n - fa)
    P[3, 2] = -1.0
    if half_pixel:
        P[0, 2] = 1.0 / cam["width"]   # NDC x - 1/W: half a pixel
        P[1, 2] = 1.0 / cam["height"]
    return P


def tinyrenderer_pixels(cam: dict, points, half_pixel: bool = True) -> np.ndarray:
    """Where TinyRenderer puts world points: ``[..., 2]`` (column, row) in its sample
    grid (pixel ``(c, r)`` is sampled at exactly ``(c, r)``). With the half-pixel shift
    these plus 0.5 are our pixel coordinates."""
    p = np.asarray(points, float)
    hom = np.concatenate([p, np.ones(p.shape[:-1] + (1,))], -1)
    clip = hom @ (pybullet_projection_matrix(cam, half_pixel) @ pybullet_view_matrix(cam)).T
    ndc = clip[..., :2] / clip[..., 3:4]
    xs = (ndc[..., 0] + 1) * cam["width"] / 2
    ys = (ndc[..., 1] + 1) * cam["height"] / 2
    return np.stack([xs, cam["height"] - 1 - ys], -1)


def moved_eye(scene, fraction: float = EYE_SHIFT) -> tuple:
    """The camera eye moved by ``fraction`` of its distance to the target, along the
    image's right-and-up diagonal (perpendicular to the viewing direction)."""
    cam = camera_spec(scene)
    fwd = cam["target"] - cam["eye"]
    dist = np.linalg.norm(fwd)
    right = np.cross(fwd, cam["up"])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    up /= np.linalg.norm(up)
    step = (right + up) / np.sqrt(2.0)
    return tuple((cam["eye"] + fraction * dist * step).tolist())


# ---- our side ----------------------------------------------------------------------------
def body_and_stage(scene):
    """(body part, stage part) of a rigid preset (the first moving and the static part)."""
    body = next(p for p in scene.parts if p.static_vertices is None)
    stage = next(p for p in scene.parts if p.static_vertices is not None)
    return body, stage


def render_ours(scene, body_verts, hard: bool = False, lights=True):
    """Our render ``[F, H, W, 4]`` (numpy) of the body at ``body_verts [F, V, 3]`` on the
    stage (soft, as the model renders), or with ``hard`` the body alone, z-buffered at
    pixel centres, unlit (its alpha is the point-sampled silhouette)."""
    import torch

    from gradsim_taichi import runtime
    from gradsim_taichi.render import SoftRasterizer

    body, stage = body_and_stage(scene)
    v = torch.as_tensor(np.asarray(body_verts), dtype=runtime.torch_dtype())
    with torch.no_grad():
        if hard:
            r = SoftRasterizer(scene.camera, [body.mesh], lights=[], mode="hard")
            return r(v).numpy()
        st = torch.as_tensor(stage.static_vertices, dtype=v.dtype)[None].expand(len(v), -1, -1)
        order = [v if p is body else st for p in scene.parts]
        return scene.renderer(order).numpy()


def soft_halo(scene, verts, ours=None) -> float:
    """How much fatter the body is in our soft render's colours than its silhouette: the
    pixels that differ from our plate by more than the key threshold outside the body's
    point-sampled silhouette, over the silhouette's pixels (all frames). The depth
    softmax lets a near body's coverage tail outweigh the stage behind it."""
    import torch

    from gradsim_taichi.objectives import KEY_THRESHOLD

    ours = render_ours(scene, verts) if ours is None else ours
    with torch.no_grad():
        plate = scene.render_backdrop().numpy()
    keyed = np.abs(ours[..., :3] - plate[None, ..., :3]).max(-1) > KEY_THRESHOLD
    sil = render_ours(scene, verts, hard=True)[..., 3] > 0.5
    return float((keyed & ~sil).sum() / max(sil.sum(), 1))


def true_body_vertices(scene) -> np.ndarray:
    """The body's posed vertices ``[F + 1, V, 3]`` on the preset's true trajectory."""
    import torch

    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        verts = scene.vertices(out)
    body, _ = body_and_stage(scene)
    return verts[scene.parts.index(body)].numpy()


def iou(a, b) -> float:
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    union = (a | b).sum()
    return float((a & b).sum() / union) if union else 1.0


# ---- Mitsuba -----------------------------------------------------------------------------
def _mitsuba_mesh(name, verts, faces, face_colors):
    """A Mitsuba mesh with one vertex per face corner (flat faces) and the face colours as
    a per-vertex ``vertex_color`` attribute read by a diffuse BSDF."""
    import mitsuba as mi

    faces = np.asarray(faces)
    pos = np.asarray(verts, float)[faces].reshape(-1, 3)
    col = np.repeat(np.clip(np.asarray(face_colors, float), 0, 1), 3, axis=0)
    props = mi.Properties()
    props["bsdf"] = mi.load_dict({"type": "diffuse", "reflectance": {
        "type": "mesh_attribute", "name": "vertex_color"}})
    mesh = mi.Mesh(name, len(pos), len(faces), props=props, has_vertex_normals=False,
                   has_vertex_texcoords=False)
    params = mi.traverse(mesh)
    params["vertex_positions"] = pos.ravel().astype(np.float32)
    params["faces"] = np.arange(len(pos), dtype=np.uint32)
    mesh.add_attribute("vertex_color", 3, col.ravel().astype(np.float32))
    params.update()
    return mesh


def _sun(direction, irradiance: float, radius_deg: float) -> dict:
    """A Mitsuba emitter giving ``irradiance`` from ``direction`` (the way the light
    travels): a directional light, or a far sphere of angular radius ``radius_deg``
    (soft shadows) whose radiance gives the same irradiance facing it."""
    if radius_deg <= 0:
        return {"type": "directional", "direction": np.asarray(direction).tolist(),
                "irradiance": {"type": "rgb", "value": irradiance}}
    far = 100.0  # metres: the scene's few metres see the same irradiance
    r = far * math.sin(math.radians(radius_deg))
    d = np.asarray(direction, float) / np.linalg.norm(direction)
    return {"type": "sphere", "center": (-d * far).tolist(), "radius": r,
            "emitter": {"type": "area", "radiance": {
                "type": "rgb", "value": irradiance / (math.pi * (r / far) ** 2)}}}


def mitsuba_frames(scene, body_verts, with_body=True, spp=None, silhouette=False,
                   seed_offset=0, centre=True):
    """Mitsuba renders ``[F, H, W, 4]`` of the body at ``body_verts`` on our stage.
    ``silhouette``: the body alone, unlit (alpha: its coverage), with ``centre`` one
    sample at each pixel centre (the point-sampled silhouette), else ``spp`` samples."""
    import mitsuba as mi

    mi.set_variant("scalar_rgb")
    spp = SPP if spp is None else spp
    cam = camera_spec(scene)
    body, stage = body_and_stage(scene)
    faces = body.mesh.faces.cpu().numpy()
    colors = body.mesh.face_colors.cpu().numpy()
    base = {"type": "scene", "integrator": {"type": "path", "max_depth": 2 if silhouette else 8},
            "sensor": mitsuba_sensor(cam, spp, centre_samples=silhouette and centre)}
    if not silhouette:
        # ours: albedo * (0.5 + 0.5 max(0, n . -d)). A constant environment of radiance
        # 0.5 gives a diffuse surface 0.5 albedo where unoccluded; a directional emitter
        # of irradiance E gives albedo / pi * E * cos: E = 0.5 pi
        d = [lt for lt in scene.renderer.lights if hasattr(lt, "direction")][0]
        ambient, sun, radius_deg = LIGHTINGS[LIGHTING]
        base["ambient"] = {"type": "constant", "radiance": {"type": "rgb", "value": ambient}}
        base["sun"] = _sun(d.direction.detach().cpu().numpy(),
                           float(d.intensity) * math.pi * sun, radius_deg)
        base["stage"] = _mitsuba_mesh("stage", stage.static_vertices,
                                      stage.mesh.faces.cpu().numpy(),
                                      stage.mesh.face_colors.cpu().numpy())
    out = []
    for k, v in enumerate(body_verts):
        scene_dict = dict(base)
        if with_body:
            scene_dict["body"] = _mitsuba_mesh("body", v, faces, colors)
        img = np.array(mi.render(mi.load_dict(scene_dict),
                                 spp=1 if silhouette and centre else spp,
                                 seed=seed_offset + k))
        out.append(img)
    return np.clip(np.stack(out), 0.0, 1.0)


def mitsuba_target(scene, shape, mass, log):
    """Mitsuba's video of our true trajectory, its background plate and the checks."""
    verts = true_body_vertices(scene)
    frames = mitsuba_frames(scene, verts)
    plate = mitsuba_frames(scene, verts[:1], with_body=False)[0]
    sil = mitsuba_frames(scene, verts, silhouette=True)[..., 3] > 0.5
    ours_sil = render_ours(scene, verts, hard=True)[..., 3] > 0.5
    ious = [iou(a, b) for a, b in zip(sil, ours_sil)]
    # area-sampled: the fraction of the pixel covered above one half
    area = mitsuba_frames(scene, verts, silhouette=True, centre=False)[..., 3] > 0.5
    area_ious = [iou(a, b) for a, b in zip(area, ours_sil)]
    ours = render_ours(scene, verts)
    mse = float(((frames[..., :3] - ours[..., :3]) ** 2).mean())
    # the sampling noise's share: half the MSE between two independent renders
    some = verts[:: max(1, len(verts) // 4)]
    again = mitsuba_frames(scene, some, seed_offset=1000)
    noise = float(((again - frames[:: max(1, len(verts) // 4)]) ** 2)[..., :3].mean() / 2)
    halo = soft_halo(scene, verts, ours)
    log["silhouette_iou_min"] = min(ious)
    log["silhouette_iou_mean"] = float(np.mean(ious))
    log["silhouette_iou_area_min"] = min(area_ious)
    log["our_soft_halo"] = halo
    log["render_mse_vs_ours"] = mse
    log["render_mse_noise_part"] = noise
    print(f"  mitsuba {shape}: silhouette IoU vs ours (point-sampled at pixel centres) "
          f"min {min(ious):.4f} mean {np.mean(ious):.4f}, area-sampled (coverage > 1/2) "
          f"min {min(area_ious):.4f}; image MSE vs our soft render "
          f"of the same meshes {mse:.2e} (of which sampling noise {noise:.2e}); our soft "
          f"render's body is {halo:.0%} larger in area than its silhouette", flush=True)
    return frames, plate, verts


# ---- PyBullet ----------------------------------------------------------------------------
def _quat_matrix(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _mu(scene) -> float:
    """The scene's Coulomb friction: its known value, or the unknown's truth."""
    if "mu" in scene.contact:
        return float(scene.contact["mu"])
    return float(scene.params["contact_mu"].true)


class PyBulletWorld:
    """The preset's body, ground and push in PyBullet (``p.DIRECT``), y up.

    The body's collision shape is the convex hull of the preset's mesh (box and cone
    are convex), its vertices given about the centre of mass in the principal axes of
    our inertia tensor (so PyBullet's diagonal inertia is ours exactly); its visual
    shape is the same mesh, one vertex per face corner, the face colours through a
    one-row texture. Friction: PyBullet multiplies the two bodies' coefficients; the
    ground has 1, the body the preset's mu. No restitution."""

    def __init__(self, scene, mass):
        import pybullet as p

        self.p, self.scene = p, scene
        self.client = p.connect(p.DIRECT)
        kw = dict(physicsClientId=self.client)
        p.setGravity(0.0, -9.8, 0.0, **kw)  # the builder's default gravity
        self.dt = 1.0 / (scene.fps * PB_SUBSTEPS)
        p.setTimeStep(self.dt, **kw)
        info = scene.build_model().rigid_body(0)
        evals, evecs = np.linalg.eigh(info.inertia)
        if np.linalg.det(evecs) < 0:
            evecs[:, 0] *= -1
        self.principal = evecs  # mesh axes -> principal axes: x_mesh = E x_principal
        self.local = (info.vertices - info.com) @ evecs  # principal-frame vertices
        self.com, self.faces = info.com, np.asarray(info.faces)
        push = scene.spec["pushes"][0]  # the preset's one known impulse (world frame)
        self.impulse = np.asarray(push["vector"], float)
        self.impulse_point = (np.asarray(push["point"]) - info.com) @ evecs
        R0 = _quat_matrix(info.orientation) @ evecs
        x0 = info.position + _quat_matrix(info.orientation) @ info.com
        ground = p.createMultiBody(0, p.createCollisionShape(p.GEOM_PLANE,
                                                             planeNormal=[0, 1, 0], **kw),
                                   **kw)
        p.changeDynamics(ground, -1, lateralFriction=1.0, restitution=0.0, **kw)
        body_part, stage = body_and_stage(scene)
        colors = body_part.mesh.face_colors.cpu().numpy()
        self._tmp = tempfile.TemporaryDirectory()
        tex_path = os.path.join(self._tmp.name, "faces.png")
        import imageio.v2 as iio

        iio.imwrite(tex_path, (np.clip(colors, 0, 1) * 255 + 0.5).astype(np.uint8)[None])
        T = len(self.faces)
        corners = self.local[self.faces].reshape(-1, 3)
        e1 = self.local[self.faces[:, 1]] - self.local[self.faces[:, 0]]
        e2 = self.local[self.faces[:, 2]] - self.local[self.faces[:, 0]]
        normals = np.cross(e1, e2)
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        uvs = np.repeat(np.stack([(np.arange(T) + 0.5) / T, np.full(T, 0.5)], 1), 3, 0)
        visual = p.createVisualShape(p.GEOM_MESH, vertices=corners.tolist(),
                                     indices=list(range(len(corners))), uvs=uvs.tolist(),
                                     normals=np.repeat(normals, 3, 0).tolist(),
                                     rgbaColor=[1, 1, 1, 1], specularColor=[0, 0, 0], **kw)
        collision = p.createCollisionShape(p.GEOM_MESH, vertices=self.local.tolist(), **kw)
        orn = _matrix_quat_xyzw(R0)
        self.body = p.createMultiBody(mass, collision, visual, basePosition=x0.tolist(),
                                      baseOrientation=orn, **kw)
        p.changeVisualShape(self.body, -1, textureUniqueId=p.loadTexture(tex_path, **kw),
                            **kw)
        p.changeDynamics(self.body, -1, lateralFriction=_mu(scene),
                         restitution=0.0, localInertiaDiagonal=(evals / info.mass * mass
                                                                ).tolist(), **kw)
        # the stage: visual only (the ground plane above collides)
        sv, sf = stage.static_vertices, stage.mesh.faces.cpu().numpy()
        scol = stage.mesh.face_colors.cpu().numpy()
        for k in range(len(sf)):
            tri = sv[sf[k]]
            n = np.cross(tri[1] - tri[0], tri[2] - tri[0])
            n /= np.linalg.norm(n)
            vs = p.createVisualShape(p.GEOM_MESH, vertices=tri.tolist(), indices=[0, 1, 2],
                                     normals=[n.tolist()] * 3,
                                     rgbaColor=list(np.clip(scol[k], 0, 1)) + [1.0],
                                     specularColor=[0, 0, 0], **kw)
            p.createMultiBody(0, -1, vs, **kw)

    def pose(self):
        p = self.p
        pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        return np.asarray(pos), np.asarray(p.getMatrixFromQuaternion(orn)).reshape(3, 3)

    def vertices(self) -> np.ndarray:
        """The body's world vertices, in the preset's vertex order."""
        pos, R = self.pose()
        return self.local @ R.T + pos

    def simulate(self, on_frame=None) -> np.ndarray:
        """Roll out the preset's frames; the body's vertices ``[F + 1, V, 3]``. The known
        impulse acts as the force ``J / duration`` at the preset's point (moving with the
        body) over the first frame, as in the preset. ``on_frame()`` is called at every
        frame (the initial state included)."""
        p, s = self.p, self.scene
        force = self.impulse * s.fps
        out = [self.vertices()]
        if on_frame is not None:
            on_frame()
        for frame in range(s.frames):
            for _ in range(PB_SUBSTEPS):
                if frame == 0:
                    pos, R = self.pose()
                    p.applyExternalForce(self.body, -1, force.tolist(),
                                         (pos + R @ self.impulse_point).tolist(),
                                         p.WORLD_FRAME, physicsClientId=self.client)
                p.stepSimulation(physicsClientId=self.client)
            out.append(self.vertices())
            if on_frame is not None:
                on_frame()
        return np.stack(out)

    def image(self, hide_body=False):
        """TinyRenderer's RGB ``[H, W, 3]`` in [0, 1] and the body's segmentation mask:
        ambient 0.5 plus diffuse 0.5 from our light's direction, no specular, shadows."""
        p, cam = self.p, camera_spec(self.scene)
        d = [lt for lt in self.scene.renderer.lights if hasattr(lt, "direction")][0]
        if hide_body:
            pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
            p.resetBasePositionAndOrientation(self.body, [0, -100, 0], orn,
                                              physicsClientId=self.client)
        w, h, rgb, _, seg = p.getCameraImage(
            cam["width"], cam["height"], pybullet_view_matrix(cam).T.ravel().tolist(),
            pybullet_projection_matrix(cam).T.ravel().tolist(),
            lightDirection=(-d.direction.detach().cpu().numpy()).tolist(),
            lightColor=[1, 1, 1], lightDistance=5.0, shadow=1, lightAmbientCoeff=0.5,
            lightDiffuseCoeff=float(d.intensity), lightSpecularCoeff=0.0,
            renderer=p.ER_TINY_RENDERER, physicsClientId=self.client)
        if hide_body:
            p.resetBasePositionAndOrientation(self.body, pos, orn, physicsClientId=self.client)
        rgb = np.reshape(np.asarray(rgb, dtype=np.float64), (h, w, 4))[..., :3] / 255.0
        return rgb, np.reshape(np.asarray(seg), (h, w)) == self.body

    def close(self):
        self.p.disconnect(physicsClientId=self.client)
        self._tmp.cleanup()


def _matrix_quat_xyzw(R) -> list:
    """A rotation matrix as PyBullet's quaternion (x, y, z, w)."""
    R = np.asarray(R, float)
    # the eigenvector of the largest eigenvalue of the symmetric 4x4 K (Bar-Itzhack)
    K = np.array([
        [R[0, 0] - R[1, 1] - R[2, 2], R[1, 0] + R[0, 1], R[2, 0] + R[0, 2], R[2, 1] - R[1, 2]],
        [R[1, 0] + R[0, 1], R[1, 1] - R[0, 0] - R[2, 2], R[2, 1] + R[1, 2], R[0, 2] - R[2, 0]],
        [R[2, 0] + R[0, 2], R[2, 1] + R[1, 2], R[2, 2] - R[0, 0] - R[1, 1], R[1, 0] - R[0, 1]],
        [R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], R[0, 0] + R[1, 1] + R[2, 2]],
    ]) / 3.0
    _, vecs = np.linalg.eigh(K)
    q = vecs[:, -1]
    return (q if q[3] >= 0 else -q).tolist()


def pybullet_target(scene, shape, mass, log):
    """PyBullet's rollout of the preset at ``mass``, drawn by TinyRenderer each frame; its
    background plate and the checks."""
    world = PyBulletWorld(scene, mass)
    frames, segs = [], []

    def grab():
        img, seg = world.image()
        frames.append(img)
        segs.append(seg)

    try:
        verts = world.simulate(on_frame=grab)
        plate, _ = world.image(hide_body=True)
    finally:
        world.close()
    frames = np.stack(frames)
    ours_sil = render_ours(scene, verts, hard=True)[..., 3] > 0.5
    ious = [iou(a, b) for a, b in zip(np.stack(segs), ours_sil)]
    ours = render_ours(scene, verts)
    mse = float(((frames - ours[..., :3]) ** 2).mean())
    own = true_body_vertices(scene)  # our engine at the same mass
    gap = np.linalg.norm(verts - own, axis=-1).max(-1)
    halo = soft_halo(scene, verts, ours)
    log.update(silhouette_iou_min=min(ious), silhouette_iou_mean=float(np.mean(ious)),
               render_mse_vs_ours=mse, our_soft_halo=halo,
               trajectory_gap_max_m=float(gap.max()),
               trajectory_gap_first_frames_m=[round(float(g), 4) for g in gap[:16]])
    print(f"  pybullet {shape} {mass:g} kg: silhouette IoU vs ours (its own poses) min "
          f"{min(ious):.4f} mean {np.mean(ious):.4f}; image MSE vs our soft render of the "
          f"same meshes {mse:.2e} (our soft render's body {halo:.0%} larger in area than "
          f"its silhouette); its trajectory vs ours at this mass: max vertex gap "
          f"{gap.max():.3f} m (frames 0-15: {np.round(gap[:16], 3).tolist()})", flush=True)
    return frames, plate, verts


# ---- the camera case -----------------------------------------------------------------------
def camera_target(scene, shape, mass, log):
    """Our render of the true trajectory from a camera whose eye moved; its plate."""
    import torch

    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.scenes import make_scene

    moved = make_scene(scene.name, shape=shape, frames=scene.frames,
                       camera_eye=moved_eye(scene))
    moved.set_truth({"mass": mass})
    moved.build()
    frames = render_target(moved).numpy()
    with torch.no_grad():
        plate = moved.render_backdrop().numpy()
    verts = true_body_vertices(scene)
    ours = render_ours(scene, verts)
    mse = float(((frames[..., :3] - ours[..., :3]) ** 2).mean())
    log["render_mse_vs_ours"] = mse
    print(f"  camera {shape}: eye {tuple(round(e, 4) for e in moved.camera_eye)} (nominal "
          f"{scene.camera_eye}); image MSE vs the nominal camera's {mse:.2e}", flush=True)
    return frames, plate, verts


def mitsuba_camera_target(scene, shape, mass, log):
    """Mitsuba's video of our true trajectory seen from the moved eye (the ``camera``
    case's camera, the ``mitsuba`` case's renderer); its plate."""
    from gradsim_taichi.scenes import make_scene

    moved = make_scene(scene.name, shape=shape, frames=scene.frames,
                       camera_eye=moved_eye(scene))
    moved.build()
    verts = true_body_vertices(scene)
    frames = mitsuba_frames(moved, verts)
    plate = mitsuba_frames(moved, verts[:1], with_body=False)[0]
    ours = render_ours(scene, verts)
    mse = float(((frames[..., :3] - ours[..., :3]) ** 2).mean())
    log["render_mse_vs_ours"] = mse
    print(f"  mitsuba-camera {shape}: eye {tuple(round(e, 4) for e in moved.camera_eye)} "
          f"(nominal {scene.camera_eye}); image MSE vs our nominal render {mse:.2e}",
          flush=True)
    return frames, plate, verts


def pybullet_physics_target(scene, shape, mass, log):
    """PyBullet's rollout drawn by our own renderer (soft, as the model draws): what is
    left of the pybullet case when the renderers agree; our plate."""
    import torch

    _, _, verts = pybullet_target(scene, shape, mass, log)
    frames = render_ours(scene, verts)
    with torch.no_grad():
        plate = scene.render_backdrop().numpy()
    return frames, plate, verts


