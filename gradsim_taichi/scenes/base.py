"""Scene presets: a model, a camera, lights and colours, ground truth, and the ranges
initial guesses are drawn from.

A preset subclasses :class:`Scene` and implements :meth:`Scene.build_model` (a
ModelBuilder for given parameter values) and :meth:`Scene.render_parts` (the meshes
to draw and where their vertices come from in the simulation outputs).

The :class:`ParamSpec` contract: ``build_model`` only builds; it never changes
``self.params``. A spec's values that depend on the built mesh (a per-particle truth and
its shape, a draw pattern, a basis) come from :meth:`Scene.derived_params`, which
:meth:`Scene.build` applies once per build with :func:`dataclasses.replace`: the spec
objects a scene was declared with are never mutated, and building again (after
``gradsim_taichi.init`` resets Taichi) gives equal specs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch

from gradsim_taichi import runtime
from gradsim_taichi.render import Camera, Mesh, SoftRasterizer
from gradsim_taichi.simulation import Simulation
from gradsim_taichi.torch_bridge import simulate


@dataclass
class ParamSpec:
    """One estimable physical parameter of a scene.

    Attributes:
        sim_name: the engine parameter it drives (``body_mass``, ``tet_mu``, ...).
        true: ground truth (scalar or array of ``shape``).
        low, high: range that initial guesses are drawn from (uniform, per element; in
            units of ``draw_pattern`` when there is one).
        shape: shape of the learnable tensor (``()``: one value broadcast to all elements).
        draw_shape: draw one initial guess of this shape and broadcast it to ``shape``.
        draw_pattern: multiplies the (broadcast) draw, e.g. each particle's share of a
            body's volume, so that the guess is a uniform density.
        basis: columns spanning a coarse subspace of the flattened (learned) parameter,
            e.g. the affine velocity fields of a body: the scene's first ``coarse_iters``
            iterations move the parameter only within it (coarse-to-fine).
        positive: learn ``log(value)`` so the value stays > 0 (masses, stiffnesses).
        doc: what it is, with units.

    A preset declares what it knows up front; fields that depend on the built mesh
    (e.g. ``true=None, shape=(-1, 3)`` for a per-particle velocity) are filled in by
    :meth:`Scene.derived_params` when the scene is built, in a new ParamSpec: a spec
    object is never changed by building.
    """

    sim_name: str
    true: float | np.ndarray
    low: float
    high: float
    shape: tuple = ()
    positive: bool = True
    doc: str = ""
    draw_shape: tuple | None = None
    draw_pattern: np.ndarray | None = None
    basis: np.ndarray | None = None

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """An initial guess drawn uniformly from ``[low, high]`` (log-uniform if positive
        and the range spans more than a factor of 10). With ``draw_shape`` one draw of
        that shape is broadcast to ``shape`` (e.g. one velocity shared by all particles),
        then multiplied by ``draw_pattern``."""
        shape = self.shape if self.draw_shape is None else self.draw_shape
        if self.positive and self.high / self.low > 10:
            value = np.exp(rng.uniform(np.log(self.low), np.log(self.high), shape))
        else:
            value = rng.uniform(self.low, self.high, shape)
        value = np.broadcast_to(value, self.shape).copy()
        return value if self.draw_pattern is None else value * self.draw_pattern


@dataclass
class RenderPart:
    """A mesh to draw: its faces and appearance, and where its vertices come from:
    ``output`` is the simulation output name (``"particles"``, ``"rigid"``) and
    ``vertex_ids`` the rows of that output (None: all rows); ``static_vertices``
    gives fixed positions instead (the ground)."""

    mesh: Mesh
    output: str | None = None
    vertex_ids: np.ndarray | None = None
    static_vertices: np.ndarray | None = None


@dataclass
class Scene:
    """Base class of the scene presets."""

    name: str = "scene"
    frames: int = 30
    substeps: int = 32
    fps: float = 60.0
    width: int = 64
    height: int = 64
    # Soft rasterizer settings. The depth softmax multiplies a face's coverage D by
    # exp(depth gap / gamma): a face's far tail (D below the cutoff, skipped) can still
    # outweigh what lies behind it, and the loss jumps where a pixel leaves the face's
    # reach. With gamma 1e-2 over a 10 m depth range (gaps up to e^30) a 1e-30 cutoff keeps
    # the jumps below 1e-15; the reach is still only ~2.6 px at sigma 1e-4 and 64 px.
    sigma: float = 1e-4
    gamma: float = 1e-2
    threshold: float = 1e-30
    # "soft" (the presets' own targets: smooth everywhere) or "antialias" (the nearest
    # surface wins, edges anti-aliased: what an ordinary renderer or a camera shows;
    # estimate --target uses it). See SoftRasterizer's ``mode``.
    render_mode: str = "soft"
    near: float = 0.1
    far: float = 10.0
    params: dict[str, ParamSpec] = field(default_factory=dict)
    default_params: tuple = ()
    camera_eye: tuple = (0.0, 1.0, 3.0)
    camera_target: tuple = (0.0, 0.3, 0.0)
    fov_y_deg: float = 40.0
    background: tuple = (1.0, 1.0, 1.0)
    description: str = ""
    iters: int = 50
    lr: float = 0.05
    optimizer: str = "adam"
    warmup: tuple = (0, 0)  # (iterations, last frame) fitted first; see estimate()
    coarse_iters: int = 0  # first iterations within each ParamSpec.basis; see estimate()
    blur: float = 0.0  # Gaussian blur (pixels) of both videos before the loss; see estimate()
    summary = ""  # one line for the CLI help
    shapes = ()  # the body shapes a preset offers (its ``shape`` field; CLI --shape)

    # ---- to implement in presets ------------------------------------------------------
    def build_model(self):
        """A ModelBuilder of the scene at its ground-truth parameters. Only builds: it
        may be called more than once per scene and must not change :attr:`params`
        (values that depend on the mesh belong in :meth:`derived_params`)."""
        raise NotImplementedError

    def derived_params(self, builder) -> dict[str, dict]:
        """Fields of :attr:`params` that depend on the built model, as
        ``{param name: {ParamSpec field: value}}`` (e.g. a per-particle ``true`` read from
        ``builder`` and its ``shape``); :meth:`build` puts them into new ParamSpec
        objects. Called with the ModelBuilder :meth:`build_model` returned, once per
        build; the values must follow from the scene's fields and declared specs alone,
        so that every build gives the same specs. Default: nothing derived."""
        return {}

    def render_parts(self, model) -> list[RenderPart]:
        """The meshes to draw, given the finalized model."""
        raise NotImplementedError

    def configure(self, sim: Simulation) -> None:
        """Set inputs that need the Simulation (per-frame forces, ...). Default: nothing."""

    def make_camera(self) -> Camera:
        """The camera :meth:`build` renders with. Default: looking from
        :attr:`camera_eye` at :attr:`camera_target` (y up) with :attr:`fov_y_deg`; a
        scene with other intrinsics or an extrinsic matrix overrides this."""
        return Camera.look_at(self.camera_eye, self.camera_target,
                              fov_y_deg=self.fov_y_deg, width=self.width,
                              height=self.height, near=self.near, far=self.far)

    # ---- machinery --------------------------------------------------------------------
    def build(self) -> None:
        """Build the model, the Simulation and the renderer (after ``gradsim_taichi.init``)."""
        runtime.ensure_init()
        builder = self.build_model()
        self.params = self._with_derived(self.derived_params(builder))
        model = builder.finalize()
        # every substep stored when it fits (Simulation's AUTO_STORE_BYTES): an estimation's
        # backward pass then skips recomputing each frame (per estimation: fem-ball and
        # fem-beam 1.17x faster, cloth-velocity 1.4x, rigid-mass 1.3x, rigid-contact 1.2x)
        self.sim = Simulation(model, frames=self.frames, substeps=self.substeps, fps=self.fps,
                              checkpoint="auto")
        self.configure(self.sim)
        self.parts = self.render_parts(model)
        for spec in self.params.values():
            self.sim.params[spec.sim_name]  # unknown names fail here, early
        self.camera = self.make_camera()
        for k, part in enumerate(self.parts):
            # the rasterizer drops faces that cross the near plane; a stage that reaches
            # past the camera would silently leave pixels with no surface
            if part.static_vertices is not None:
                _, depth = self.camera.project(part.static_vertices)
                if (depth <= self.near).any():
                    worst = part.static_vertices[int(torch.argmin(depth))].tolist()
                    raise ValueError(
                        f"scene '{self.name}': render part {k} has fixed vertices closer "
                        f"than the near plane ({self.near}) or behind the camera (e.g. "
                        f"{[round(c, 3) for c in worst]}, depth {float(depth.min()):.3g}); "
                        "faces crossing it are not drawn. Keep the stage in front of the "
                        "camera: in a scene file shorten [stage] extent (x0, x1, z0, z1) "
                        "or move [camera] eye; in Python ground_part(extent=...)")
        self._make_renderers()
        self._generation = runtime.generation()

    def _make_renderers(self) -> None:
        """The renderers of :attr:`render_mode` (the model and the camera built)."""
        # the simulated objects (the stage is static); in the hard and antialiased modes
        # they shadow themselves and each other from the directional lights
        moving = [k for k, p in enumerate(self.parts) if p.static_vertices is None]
        self.renderer = SoftRasterizer(self.camera, [p.mesh for p in self.parts],
                                       mode=self.render_mode, sigma=self.sigma,
                                       gamma=self.gamma,
                                       threshold=self.threshold,
                                       background=torch.tensor(
                                           self.background, dtype=runtime.torch_dtype(),
                                           device=runtime.torch_device()),
                                       sun_shadows=(moving if moving and self.render_mode != "soft"
                                                    else None))
        # the simulated objects alone (no ground, no backdrop), unlit: their coverage
        # (alpha), which the full render's alpha is not (the stage covers every pixel)
        objects = [p.mesh for p in self.parts if p.static_vertices is None]
        self.coverage_renderer = SoftRasterizer(
            self.camera, objects, lights=[], mode=self.render_mode, sigma=self.sigma,
            gamma=self.gamma,
            threshold=self.threshold) if objects else None

    def _with_derived(self, derived: dict) -> dict:
        """:attr:`params` with the derived fields applied (new spec objects for the
        changed ones; the others are kept as they are)."""
        names = {f.name for f in fields(ParamSpec)} - {"sim_name"}
        out = dict(self.params)
        for name, values in derived.items():
            if name not in out:
                raise ValueError(f"scene '{self.name}': derived_params names parameter "
                                 f"{name!r}, which is not in params ({', '.join(out)})")
            unknown = set(values) - names
            if unknown:
                raise ValueError(f"scene '{self.name}': derived_params gives {name!r} the "
                                 f"fields {sorted(unknown)}; ParamSpec fields are "
                                 f"{sorted(names)}")
            out[name] = replace(out[name], **values)
        return out

    def ensure_built(self) -> None:
        """Build when never built or the runtime was re-initialised; make the renderers
        again when only :attr:`render_mode` changed (the model and its compiled kernels
        kept: the command sets the own-video render mode after checking the built scene,
        and a full build again cost a second compile of every kernel)."""
        renderer = getattr(self, "renderer", None)
        if getattr(self, "_generation", None) != runtime.generation() or renderer is None:
            self.build()
        elif renderer.mode != self.render_mode:
            self._make_renderers()

    def simulate(self, values: dict[str, torch.Tensor], frames: int | None = None
                 ) -> dict[str, torch.Tensor]:
        """Rollout with ``{param name: tensor}`` (names of :attr:`params`), of the first
        ``frames`` frames (default: all)."""
        self.ensure_built()
        engine = {self.params[k].sim_name: v for k, v in values.items()}
        return simulate(self.sim, engine, frames)

    def vertices(self, outputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Per render part, vertex positions ``[F + 1, V_k, 3]``."""
        out = []
        dtype, device = runtime.torch_dtype(), runtime.torch_device()
        for part in self.parts:
            if part.static_vertices is not None:
                out.append(torch.as_tensor(part.static_vertices, dtype=dtype, device=device))
            else:
                x = outputs[part.output]
                out.append(x if part.vertex_ids is None else x[:, torch.as_tensor(part.vertex_ids)])
        return out

    def posed_vertices(self, outputs, frame_ids=None) -> list[torch.Tensor]:
        """Per render part, vertex positions ``[F', V_k, 3]`` of the chosen frames
        (default all; fixed parts repeated)."""
        verts = self.vertices(outputs)
        if frame_ids is not None:
            idx = torch.as_tensor(frame_ids)
            verts = [v[idx] if v.ndim == 3 else v for v in verts]
        F = next((v.shape[0] for v in verts if v.ndim == 3), 1)
        return [v if v.ndim == 3 else v[None].expand(F, -1, -1) for v in verts]

    def render(self, outputs, frame_ids=None, coverage: bool = False) -> torch.Tensor:
        """RGBA frames ``[F', H, W, 4]`` of the chosen frames (default all). The alpha of
        the full render is ~1 everywhere (the stage covers the image); ``coverage=True``
        puts the soft coverage of the simulated objects alone there instead (the ground
        and backdrop excluded; occlusion by them ignored): what the mask losses compare
        with a target mask."""
        return self.render_with(self.renderer, self.coverage_renderer,
                                self.posed_vertices(outputs, frame_ids), coverage)

    def render_with(self, renderer, coverage_renderer, verts, coverage: bool
                    ) -> torch.Tensor:
        """:meth:`render` with these renderers (all parts; the simulated parts alone,
        unlit, for the coverage) and posed vertices."""
        frames = renderer(verts)
        if not coverage:
            return frames
        moving = [v for v, p in zip(verts, self.parts) if p.static_vertices is None]
        if coverage_renderer is None:
            alpha = torch.zeros_like(frames[..., 3:])
        else:
            alpha = coverage_renderer.coverage(moving)
        return torch.cat([frames[..., :3], alpha], -1)

    def render_backdrop(self) -> torch.Tensor:
        """The stage without the simulated objects, RGBA ``[H, W, 4]``: a background plate
        for :func:`gradsim_taichi.objectives.mask_from_plate`."""
        self.ensure_built()
        static = [(p.mesh, torch.as_tensor(p.static_vertices, dtype=runtime.torch_dtype()))
                  for p in self.parts if p.static_vertices is not None]
        if not static:
            bg = torch.tensor(self.background, dtype=runtime.torch_dtype())
            return torch.cat([bg.expand(self.height, self.width, 3),
                              torch.zeros(self.height, self.width, 1, dtype=bg.dtype)], -1)
        r = self.renderer
        plate = SoftRasterizer(self.camera, [m for m, _ in static], lights=r.lights,
                               mode=r.mode, sigma=r.sigma, gamma=r.gamma, threshold=r.threshold,
                               background=r.background, eps=r.eps)
        return plate([v for _, v in static])

    def tracked_positions(self, outputs) -> torch.Tensor:
        """Positions of every simulated render vertex ``[F + 1, V, 3]`` (3D supervision)."""
        return torch.cat([v for v, p in zip(self.vertices(outputs), self.parts)
                          if p.static_vertices is None], dim=1)

    def check_params(self, names) -> list:
        """``names`` as a list; a KeyError naming the first that is not a parameter of
        this scene, with the valid ones."""
        names = list(names)
        unknown = [n for n in names if n not in self.params]
        if unknown:
            raise KeyError(f"scene '{self.name}' has no parameter {unknown[0]!r}; "
                           f"valid: {', '.join(self.params)}")
        return names

    def set_truth(self, values: dict) -> None:
        """Make ``values`` (``{name: value}``) the ground truth of those parameters (in new
        specs: declared ones are never changed); the scene is rebuilt when next used. A
        KeyError for an unknown name, a ValueError for a value that is not finite (or
        not > 0 for a positive parameter)."""
        self.check_params(values)
        for n, v in values.items():
            v = np.asarray(v, dtype=np.float64)
            if not np.all(np.isfinite(v)) or (self.params[n].positive and np.any(v <= 0)):
                raise ValueError(f"true value of {n!r} must be finite"
                                 f"{' and > 0' if self.params[n].positive else ''}; got {v}")
        self.params = {n: replace(spec, true=values[n]) if n in values else spec
                       for n, spec in self.params.items()}
        self._generation = None

    def true_values(self, names) -> dict[str, torch.Tensor]:
        dtype, device = runtime.torch_dtype(), runtime.torch_device()
        return {n: torch.as_tensor(np.asarray(self.params[n].true, dtype=np.float64),
                                   dtype=dtype, device=device) for n in names}


def ramp_colors(rest: np.ndarray, base, strength: float = 0.3) -> np.ndarray:
    """Per-vertex albedo ``[V, 3]`` that varies smoothly over a body's rest shape: red with
    x, green with y, blue with z around ``base`` (each axis normalised to the body's
    extent; a flat axis adds nothing). A uniform colour hides a ball's rotation and a
    cloth's in-plane motion; the ramp makes every material point's motion visible, as a
    texture would, while staying smooth (no aliased edges in the loss)."""
    rest = np.asarray(rest, dtype=np.float64)
    lo, span = rest.min(axis=0), np.ptp(rest, axis=0)
    t = np.where(span > 1e-9, (rest - lo) / np.maximum(span, 1e-9) - 0.5, 0.0)
    return np.clip(np.asarray(base, dtype=np.float64) + 2 * strength * t, 0.05, 0.95)


def soft_parts(model, color, rest=None, ramp=0.0) -> list[RenderPart]:
    """The boundary surface of every soft mesh of the model, drawn from the particles;
    with ``rest`` positions and ``ramp`` > 0 coloured by :func:`ramp_colors`."""
    parts = []
    for offset, tris in model.soft_surfaces:
        ids = offset + np.arange(tris.max() + 1)
        look = ramp_look(None if rest is None else rest[ids], color, ramp)
        parts.append(RenderPart(Mesh(tris, **look), output="particles", vertex_ids=ids))
    return parts


def ramp_look(rest, color, ramp: float) -> dict:
    """Mesh keywords of a body's appearance: per-vertex :func:`ramp_colors` over its
    ``rest`` positions with strength ``ramp`` > 0, else the uniform ``color``."""
    return (dict(vertex_colors=ramp_colors(rest, color, ramp)) if ramp > 0
            else dict(color=color))


def affine_basis(rest: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning the affine vector fields ``a + B x`` over the points
    ``rest`` ``[N, 3]``, flattened like an ``[N, 3]`` array: translations, rotations,
    stretches and shears (12 columns, fewer for flat or collinear points)."""
    rest = np.asarray(rest, dtype=np.float64)
    n = len(rest)
    scalar = np.concatenate([np.ones((n, 1)), rest - rest.mean(axis=0)], axis=1)  # [N, 4]
    cols = np.zeros((n, 3, 4, 3))  # column (k, d): component d equal to scalar k
    for d in range(3):
        cols[:, d, :, d] = scalar
    cols = cols.reshape(3 * n, 12)
    u, sv, _ = np.linalg.svd(cols, full_matrices=False)
    return u[:, sv > 1e-9 * sv.max()]


def ground_part(extent=(-3.0, 3.0, -3.0, 1.0), height: float = 0.0, wall_height: float = 3.0,
                color=(0.55, 0.6, 0.55), wall_color=(0.85, 0.85, 0.88)) -> RenderPart:
    """The stage: a ground rectangle ``x in [x0, x1], z in [z0, z1]`` at y = ``height`` and a
    backdrop wall at z = z0, both facing the camera side (+y, +z).

    Every pixel should see some surface: where the soft rasterizer's background shows
    through, an object's far coverage tail (D ~ 1e-14) still outweighs the background in
    the depth softmax, so colours flip at the coverage cutoff and the loss jumps. Against
    a surface, the object's weight fades in smoothly. Keep ``z1`` in front of the camera
    (faces crossing the near plane are culled)."""
    x0, x1, z0, z1 = extent
    h, top = height, height + wall_height
    verts = np.array([[x0, h, z0], [x1, h, z0], [x1, h, z1], [x0, h, z1],
                      [x0, top, z0], [x1, top, z0]], dtype=np.float64)
    faces = np.array([[0, 2, 1], [0, 3, 2], [0, 1, 5], [0, 5, 4]])
    colors = np.array([color, color, wall_color, wall_color], dtype=np.float64)
    return RenderPart(Mesh(faces, face_colors=colors, smooth=False), static_vertices=verts)


def normal_face_colors(v, faces, base) -> np.ndarray:
    """Colours ``[F, 3]`` around ``base`` that vary with each face's normal in the body
    frame (``shading = "normals"``), so that rotation is visible."""
    n = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
    n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
    return np.clip(np.asarray(base, dtype=np.float64) + 0.25 * n, 0.05, 0.95)
