"""Nuisance parameters fitted jointly with the physics: ``estimate(fit=...)``, ``--fit``.

A video the engine did not make differs from the model's image in ways that have
nothing to do with the physics: the camera is not quite where the scene file says, the
backdrop has shadows, bounce light and texture the stage cannot draw, the object's
colour and the light are not the ones declared. Each kind below adds named parameters
that the optimiser learns together with the physical ones; none changes the simulation.

- ``camera``: a small pose correction, ``camera_rotation`` (an axis-angle vector, radians,
  applied to the camera frame) and ``camera_translation`` (metres, in the camera frame),
  both starting at zero: ``R = exp([w]x) R0``, ``t = exp([w]x) t0 + d``, each component
  within :data:`CAMERA_TURN_MAX` radians and :data:`CAMERA_SHIFT_MAX` of the camera's
  distance from the origin or of 1 m if more (:attr:`Nuisance.bounds`). The intrinsics
  are kept.
- ``background``: the stage is not drawn; the objects are composited over a static
  background image, ``image = objects + (1 - coverage) * background``. Given a plate
  (``estimate(background=...)``, the CLI's ``--background-plate``) the background is
  that image; otherwise it is solved per pixel at every evaluation, in closed form, as
  the least-squares fit of the compared frames where the objects leave the pixel
  uncovered (variable projection: it costs no optimiser dimension and follows the
  physics exactly), pulled weakly towards the video's per-pixel temporal median where
  they never do; under the robust loss, with its weights (a passing shadow does not
  darken the background).
- ``appearance``: ``albedo_gain`` (RGB factors on the simulated objects' albedo, from 1),
  ``ambient`` and ``light_intensity`` (the scene's ambient and directional light, from
  their declared values; with ``background`` the directional light keeps its intensity:
  only the objects are lit then, and the gain carries the lights' common scale) and
  ``light_direction`` (two offsets of the directional light's direction across itself,
  from 0).
- ``shadow``: the simulated objects cast a shadow on the ground plane along the
  directional light (the appearance's direction when that is fitted too): their meshes
  projected onto the ground (:func:`~gradsim_taichi.ground_shading.flattened`: lifted
  off it a little, so that the body's overlapping faces keep one depth order and the
  cover moves smoothly with it), drawn as coverage, blurred by :data:`SHADOW_BLUR` pixels
  and darkening what lies behind the objects by the factor
  ``1 - shadow_strength * coverage`` (from 0: no shadow; used within [0, 1]). A shadow
  that moves with the object is what a static background cannot take in; the robust
  loss only down-weights it. The blur is not learned: learned too, the fit found a
  sharp, faint shadow or a wide, dark one depending on the initial guess, and the mass
  followed. With it, the ground's ambient occlusion by the objects (the sky they hide
  from the ground below and around them, a soft darkening that deepens as they come
  down): each moving part taken as a sphere, which hides ``F`` of the sky of the ground
  point a pixel's ray meets (:func:`~gradsim_taichi.ground_shading.sphere_occlusion`),
  darkening by ``1 - occlusion_strength * F``, times the cast shadow's factor. The
  occlusion strength is an RGB triple (each from 0; used within [0, 1]): the sky's
  light the body hides less what it bounces onto the ground in that channel (on
  path-traced clips of the red rigid-mass body about 0.2 in red, 0.4 in green and blue).
- ``bounce``: what each moving body does to the ground's light around it beyond its
  shadow and occlusion (its bounce light, the crevice along its contact): a learned map
  ``bounce_map [bodies, 3, G, G]`` (from 0) that moves with the body, a factor
  ``1 + map`` on the ground (:func:`~gradsim_taichi.ground_shading.bounce_factor`).
  Hundreds of values: not calibrated on frame 0, held by the uncertainty, and only
  with a gradient optimiser.
- ``blur``: the camera's blur (its optics and focus, demosaicing, another renderer's
  pixel filter): the image is blurred by a Gaussian point spread of standard deviation
  ``|blur_sigma|`` pixels (from :data:`BLUR_START`), the discrete Gaussian of
  :func:`~gradsim_taichi.objectives.heat_blur_frames` with variance ``blur_sigma^2``.
  The square keeps the loss smooth and unbounded in the learned value, with its
  minimum at 0 for a sharp clip (a variance bounded at 0 left L-BFGS's line searches
  stepping out of the bound: 80 iterations without converging on a path-traced box).
  The model's edges are sharp and a blurred clip's are not: our own render blurred by
  1 px put the cone's mass 3.7e-3 off with the backdrop and shadow solved. The frame-0
  calibration sets a blur under :data:`BLUR_SHARP` to exactly 0 (:meth:`Nuisance.settle_blur`),
  where its gradient is 0 too: a sharp clip is then fitted as without the kind, at its
  cost (path-traced, box-filtered: calibrated 0.22 px; Mitsuba's Gaussian pixel filter:
  0.56 px). With ``background``, the objects' layer and their shadow are blurred and
  the background is solved as the video shows it. At most :data:`BLUR_MAX`.
- ``response``: the camera's response to light: the model's linear image is recorded
  as ``(1 + c) x^(1/gamma) - c`` (``gamma`` from 1: linear, within :data:`GAMMA_RANGE`;
  the offset ``c``, ``response_offset``, from 0 within :data:`RESPONSE_OFFSET_RANGE`),
  after the blur. The family holds a plain power law (``c = 0``), sRGB (``gamma`` 2.4,
  ``c`` 0.055) and BT.709 (1/0.45, 0.099), but for their linear toes near black.
  Cameras and most renderers' 8-bit files store sRGB, the model's shading is linear: on
  Mitsuba's frames of the box put through the sRGB curve the mass came out 3.4e-2 off
  with the backdrop, shadow and blur fitted; the power law alone took the cone to
  3.9e-3, with the offset learned 1.5e-3 (``gamma`` 2.40, ``c`` 0.051). With
  ``background`` the background is solved in linear light (the compared frames through
  the response's inverse, :meth:`Nuisance.linear`), the objects' layer composited over
  it, darkened by the shadow, and the response applied to the sum: a pixel that a body's
  edge half covers records the response of the mix, not the mix of two responses
  (compositing the recorded values instead, the cone's sRGB clip above: 1.5e-3; in
  linear light 4.4e-4).

The uncertainty reported at the end leaves the nuisance values free (their elements are
columns of its Jacobian; see :func:`gradsim_taichi.uncertainty.local_uncertainty`).
"""

from __future__ import annotations

import copy

import torch

from gradsim_taichi import ground_shading as ground
from gradsim_taichi import runtime
from gradsim_taichi.objectives import blur_frames, heat_blur_frames
from gradsim_taichi.render import AmbientLight, Camera, DirectionalLight, SoftRasterizer
from gradsim_taichi.reuse import LastResult

KINDS = ("camera", "background", "appearance", "shadow", "bounce", "blur", "response")
# the parameters of the kind "camera" (Fit holds them through a gradient optimiser's
# warm-up, see Fit.calibrate)
CAMERA_PARAMS = ("camera_rotation", "camera_translation")
# the values applied after the objects' layer is drawn: a render reuses the layer when
# only these changed (any other value, a new one included, is taken to change it)
AFTER_THE_LAYER = ("shadow_strength", "occlusion_strength", "bounce_map", "blur_sigma",
                   "gamma", "response_offset")
# values too many for a Jacobian column each (a map's cells): not calibrated on frame 0
# (which cannot tell them from the background either), not columns of the uncertainty,
# and held until every frame is fitted (Fit)
MANY_VALUED = ("bounce_map",)

# weight (in frames) of the temporal median in the background's least-squares solve
BACKGROUND_PRIOR = 1e-2
# reweighting steps of that solve under the robust loss (estimate(loss="robust"))
ROBUST_STEPS = 5
# the shadow's blur: a Gaussian's standard deviation in pixels (a directional light's
# shadow is sharp; the renderer anti-aliases its edge already)
SHADOW_BLUR = 0.5
# the blur's starting standard deviation (pixels): a faint blur, where the loss's
# derivative in it is not yet 0 (it is at 0: the variance is its square)
BLUR_START = 0.3
# a blur below this (pixels) is a sharp image: the frame-0 calibration sets it to 0,
# where the image is the unblurred one and the gradient in blur_sigma is exactly 0, so
# a gradient optimiser leaves it there and the run costs what it did without the kind;
# the uncertainty holds it there too (the loss is flat in it at 0)
BLUR_SHARP = 0.35
# the widest blur (pixels): on an sRGB clip fitted with a linear image the blur ran
# away to 9 px, blurring the mismatch out
BLUR_MAX = 3.0
# the camera response's exponent (kind "response"): from 1 (linear), within these
GAMMA_RANGE = (0.5, 3.0)
# the darkest linear value the response is taken at (x^(1/gamma) is steep at 0)
RESPONSE_FLOOR = 1e-4
# the response's offset (kind "response"): from 0 (a power law), within these (sRGB's
# is 0.055, BT.709's 0.099)
RESPONSE_OFFSET_RANGE = (0.0, 0.2)
# the camera's pose correction (kind "camera"): each rotation component within this
# (radians, ~6 degrees), each translation component within this fraction of the
# camera's distance from the world's origin (or of 1 m, if more): a small correction.
# Unbounded, a path-traced box's fit with the backdrop solved turned the camera by
# 0.39 rad and lost the mass (1.6 off; the solved background fits any view of the
# static stage)
CAMERA_TURN_MAX = 0.1
CAMERA_SHIFT_MAX = 0.1
# the parameters used within bounds (see Nuisance.project; the camera's: Nuisance.bounds)
BOUNDS = {"shadow_strength": (0.0, 1.0), "occlusion_strength": (0.0, 1.0),
          "blur_sigma": (-BLUR_MAX, BLUR_MAX), "gamma": GAMMA_RANGE,
          "response_offset": RESPONSE_OFFSET_RANGE}
# the learned values each kind adds (the background is solved, not learned; with it,
# appearance learns one fewer: see unknowns())
UNKNOWNS = {"camera": 6, "background": 0, "appearance": 7, "shadow": 4,
            "bounce": 3 * ground.BOUNCE_CELLS ** 2, "blur": 1, "response": 2}


def unknowns(kinds) -> int:
    """How many values the nuisance kinds ``kinds`` learn (with ``background`` the
    directional light's intensity is not learned; ``bounce``: one moving body's map)."""
    kinds = set(kinds)
    return sum(UNKNOWNS[k] for k in kinds) - ({"appearance", "background"} <= kinds)


def parse_fit(fit, default=()) -> tuple:
    """The kinds ``fit`` asks for, as a tuple in :data:`KINDS` order: ``default`` with the
    names in ``fit`` (a comma-separated string or a list) added to it, ``-kind`` taken out
    of it (``+kind`` is the same as ``kind``), and ``none`` dropping it: ``"none"`` (or
    an empty list) learns nothing, ``"none,camera"`` only the camera. ``fit`` None:
    ``default``. A ValueError names an unknown kind, or one both added and taken out."""
    if fit is None:
        return parse_fit(default)  # (an empty default: none)
    names = [s.strip() for s in fit.split(",")] if isinstance(fit, str) else list(fit)
    names = [n for n in names if n] or ["none"]
    kind = {n: n[1:] if n[0] in "+-" else n for n in names}
    unknown = [n for n in names if n != "none" and kind[n] not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; choose from {', '.join(KINDS)} "
                         "(comma-separated: added to the default; -kind takes one out of "
                         "it, none drops it)")
    adds = {kind[n] for n in names if n != "none" and n[0] != "-"}
    drops = {kind[n] for n in names if n[0] == "-"}
    if adds & drops:
        raise ValueError(f"{sorted(adds & drops)[0]!r} is both added and taken out")
    base = set() if "none" in names else set(default)
    return tuple(k for k in KINDS if k in (base | adds) - drops)


def casts_shadows(scene) -> bool:
    """Whether the kind ``shadow`` can draw ``scene``'s shadows: a directional light and a
    ground plane to cast them on (a built scene)."""
    ground = scene.sim.model.ground if scene.sim is not None else None
    return ground is not None and any(isinstance(lt, DirectionalLight)
                                      for lt in scene.renderer.lights)


def has_ground(scene) -> bool:
    """Whether ``scene`` (built) has a ground plane, which the kind ``bounce`` draws on."""
    return scene.sim is not None and scene.sim.model.ground is not None


def lit_by_ambient_and_sun(scene) -> bool:
    """Whether the kind ``appearance`` can learn ``scene``'s lights: an ambient and a
    directional light."""
    lights = scene.renderer.lights
    return (any(isinstance(lt, AmbientLight) for lt in lights)
            and any(isinstance(lt, DirectionalLight) for lt in lights))


def _rotation(w: torch.Tensor) -> torch.Tensor:
    """``exp([w]x)``: the rotation by the axis-angle vector ``w`` (smooth at 0)."""
    z = torch.zeros((), dtype=w.dtype, device=w.device)
    K = torch.stack([torch.stack([z, -w[2], w[1]]), torch.stack([w[2], z, -w[0]]),
                     torch.stack([-w[1], w[0], z])])
    return torch.linalg.matrix_exp(K)


def _pose(camera) -> list:
    """What places ``camera``'s image: its extrinsic and its intrinsics (tensors)."""
    return [*camera.world_to_camera(), *(torch.as_tensor(x) for x in camera.intrinsics())]


def _tinted(mesh, gain: torch.Tensor):
    """A copy of ``mesh`` whose albedo is multiplied by ``gain [3]``."""
    m = copy.copy(mesh)
    if m.vertex_colors is not None:
        m.vertex_colors = m.vertex_colors.to(gain) * gain
    elif m.face_colors is not None:
        m.face_colors = m.face_colors.to(gain) * gain
    m.color = m.color.to(gain) * gain
    return m


class Nuisance:
    """The nuisance parameters of one estimation and the render that uses them.

    Args:
        scene: a built :class:`~gradsim_taichi.scenes.Scene`.
        kinds: a subset of :data:`KINDS` (see :func:`parse_fit`).
        target: the target video ``[F + 1, H, W, 3|4]`` (the background's median and
            least-squares data).
        background: a fixed background image ``[H, W, 3]`` (a plate of the empty stage)
            instead of the solved one.
        robust_eps: with the robust loss (``estimate(loss="robust")``), its scale: the
            background is then solved with the same robust weights.
    """

    def __init__(self, scene, kinds, target: torch.Tensor, background=None,
                 robust_eps: float | None = None):
        self.scene, self.kinds = scene, tuple(kinds)
        self.robust_eps = robust_eps
        dt, dev = runtime.torch_dtype(), runtime.torch_device()
        self.params: dict[str, torch.Tensor] = {}

        def learned(value):
            return torch.as_tensor(value, dtype=dt, device=dev).clone().requires_grad_(True)

        self.bounds = dict(BOUNDS)
        if "camera" in self.kinds:
            for name in CAMERA_PARAMS:  # axis-angle (radians), metres
                self.params[name] = learned([0.0, 0.0, 0.0])
            # (at least 1 m: a camera at the world's origin, an identity extrinsic)
            shift = CAMERA_SHIFT_MAX * max(
                float(scene.camera.world_to_camera()[1].detach().norm()), 1.0)
            self.bounds["camera_rotation"] = (-CAMERA_TURN_MAX, CAMERA_TURN_MAX)
            self.bounds["camera_translation"] = (-shift, shift)
        lights = scene.renderer.lights
        self.ambient = next((lt for lt in lights if isinstance(lt, AmbientLight)), None)
        self.sun = next((lt for lt in lights if isinstance(lt, DirectionalLight)), None)
        if "appearance" in self.kinds:
            if not lit_by_ambient_and_sun(scene):
                raise ValueError("fit 'appearance' needs a scene lit by an ambient and a "
                                 "directional light")
            self.params["albedo_gain"] = learned([1.0, 1.0, 1.0])
            self.params["ambient"] = learned(float(self.ambient.intensity))
            # with the background solved only the objects are lit, each pixel albedo x
            # light: the gain and the lights' common scale are one direction the image
            # does not see, along which L-BFGS drifted without converging (a path-traced
            # rock's loss flat to 4 digits for 26 iterations, each slower as its line
            # search failed), so the sun keeps its own
            if "background" not in self.kinds:
                self.params["light_intensity"] = learned(float(self.sun.intensity))
            self.params["light_direction"] = learned([0.0, 0.0])
        if "shadow" in self.kinds:
            if not casts_shadows(scene):
                raise ValueError("fit 'shadow' needs a directional light and a ground plane "
                                 "(the shadow is cast along the light onto the ground)")
            self._check_light_shines_down()
            self.params["shadow_strength"] = learned(0.0)
            self.params["occlusion_strength"] = learned([0.0, 0.0, 0.0])  # RGB
        if "bounce" in self.kinds:
            if not has_ground(scene):
                raise ValueError("fit 'bounce' needs a ground plane (the map is the "
                                 "bodies' light on the ground around them)")
            g = ground.BOUNCE_CELLS
            moving = [p for p in scene.parts if p.static_vertices is None]
            self.params["bounce_map"] = learned(torch.zeros(max(len(moving), 1), 3, g, g))
            self.bounce_reach = None  # (set at the first render: BOUNCE_REACH radii)
        if {"shadow", "bounce"} & set(self.kinds):
            self.ground_height = scene.sim.model.ground.height
        if "blur" in self.kinds:
            self.params["blur_sigma"] = learned(BLUR_START)
        if "response" in self.kinds:
            self.params["gamma"] = learned(1.0)
            self.params["response_offset"] = learned(0.0)
        # the render's stages that a calibration column often leaves unchanged (reuse)
        self.last_cover, self.last_layer = LastResult(), LastResult()
        self.target = target[..., :3]
        self.plate = None
        self.background = None  # the last background used (for the report)
        if "background" in self.kinds:
            if background is not None:
                bg = torch.as_tensor(background, dtype=dt, device=dev)
                want = (scene.height, scene.width, 3)
                if tuple(bg.shape) != want:
                    raise ValueError(f"background must be {list(want)} (the scene's "
                                     f"resolution, RGB), got {list(bg.shape)}")
                self.plate = bg[..., :3]
            self.median = self.target.median(0).values
            self.background = self.plate if self.plate is not None else self.median

    def tensors(self) -> list[torch.Tensor]:
        """The learned tensors (for the optimiser)."""
        return list(self.params.values())

    def values(self) -> dict[str, torch.Tensor]:
        return {n: t.detach() for n, t in self.params.items()}

    # ---- the pieces ----------------------------------------------------------------------
    def camera(self) -> Camera:
        cam = self.scene.camera
        if "camera" not in self.kinds:
            return cam
        R0, t0 = (x.detach() for x in cam.world_to_camera())
        dR = _rotation(self.params["camera_rotation"])
        R = dR @ R0
        t = dR @ t0 + self.params["camera_translation"]
        T = torch.cat([torch.cat([R, t[:, None]], 1),
                       torch.tensor([[0.0, 0.0, 0.0, 1.0]], dtype=R.dtype, device=R.device)])
        fx, fy, cx, cy = (x.detach() for x in cam.intrinsics())
        return Camera.from_extrinsic(T, fx, fy, cx, cy, cam.width, cam.height, cam.near,
                                     cam.far)

    def light_direction(self) -> torch.Tensor:
        """The directional light's direction of travel (with the fitted offsets)."""
        d0 = self.sun.direction.detach().to(runtime.torch_dtype())
        if "appearance" not in self.kinds:
            return d0
        d0 = d0 / d0.norm()
        # two unit vectors across the light's direction
        helper = torch.zeros_like(d0)
        helper[int(torch.argmin(d0.abs()))] = 1.0
        e1 = torch.linalg.cross(d0, helper)
        e1 = e1 / e1.norm()
        e2 = torch.linalg.cross(d0, e1)
        off = self.params["light_direction"]
        return d0 + off[0] * e1 + off[1] * e2

    def light_shines_down(self) -> bool:
        """Whether the directional light shines downwards (more than ~3 degrees below
        the horizon), as the kind ``shadow`` needs to cast a shadow on the ground."""
        d = self.light_direction().detach() if self.sun is not None else None
        return d is not None and float(d[1]) < -0.05 * float(d.norm())

    def _check_light_shines_down(self) -> None:
        if not self.light_shines_down():
            raise ValueError("fit 'shadow': the directional light must shine downwards "
                             f"(direction {self.light_direction().detach().tolist()}) to "
                             "cast a shadow on the ground")

    def drawable(self) -> bool:
        """Whether the model can draw at the current values: a trial step of
        ``appearance``'s light direction can turn the light up, where ``shadow`` has no
        shadow to cast (the fit treats it as a step too far, not as an error)."""
        return "shadow" not in self.kinds or self.light_shines_down()

    def lights(self) -> list:
        lights = self.scene.renderer.lights
        if "appearance" not in self.kinds:
            return lights
        direction = self.light_direction()
        out = []
        for lt in lights:
            if lt is self.ambient:
                out.append(AmbientLight(self.params["ambient"], lt.color))
            elif lt is self.sun:
                out.append(DirectionalLight(
                    direction, self.params.get("light_intensity", lt.intensity), lt.color))
            else:
                out.append(lt)
        return out

    def meshes(self) -> list:
        parts = self.scene.parts
        if "appearance" not in self.kinds:
            return [p.mesh for p in parts]
        gain = self.params["albedo_gain"]
        return [_tinted(p.mesh, gain) if p.static_vertices is None else p.mesh for p in parts]

    def _renderer(self, camera, meshes, lights, background, sun_shadows=None):
        r = self.scene.renderer
        if r.mode == "soft":  # (the soft mode has no shadows on the objects)
            sun_shadows = None
        return SoftRasterizer(camera, meshes, lights=lights, mode=r.mode, sigma=r.sigma,
                              gamma=r.gamma, threshold=r.threshold, eps=r.eps,
                              background=background, supersample=r.supersample,
                              sun_shadows=sun_shadows)

    def shadow(self, camera, meshes, verts, moving) -> torch.Tensor:
        """The factor ``[F, H, W, 3]`` (per colour channel) on the light of what lies
        behind the objects: their shadow and occlusion (kind ``shadow``) times the
        bounce maps' factor (kind ``bounce``); 1 everywhere without either."""
        out = torch.ones((), dtype=runtime.torch_dtype(), device=runtime.torch_device())
        if "shadow" in self.kinds or "bounce" in self.kinds:
            points, hit = ground.ground_points(camera, self.ground_height)
            parts = [verts[k] for k in moving]
        if "shadow" in self.kinds:
            out = self._shadow(camera, meshes, verts, moving, points, hit, parts)
        if "bounce" in self.kinds:
            if self.bounce_reach is None:  # (from the initial state: fixed for the run)
                self.bounce_reach = [ground.BOUNCE_REACH * ground.radius(v[0]) for v in parts]
            out = out * ground.bounce_factor(points, hit, parts, self.params["bounce_map"],
                                             self.bounce_reach)
        return out

    def _shadow(self, camera, meshes, verts, moving, points, hit, parts) -> torch.Tensor:
        """The cast shadow's and the ground occlusion's darkening (kind ``shadow``)."""
        self._check_light_shines_down()
        d = self.light_direction()
        h = self.ground_height

        def draw_cover():
            flat = [ground.flattened(verts[k], d, h) for k in moving]
            r = self._renderer(camera, [meshes[k] for k in moving], [], (0.0, 0.0, 0.0))
            return blur_frames(r.coverage(flat), SHADOW_BLUR)
        cover = self.last_cover.get([*_pose(camera), d, *(verts[k] for k in moving)],
                                    draw_cover)
        # (a shadow only darkens, and at most to black)
        cast = 1.0 - self.params["shadow_strength"].clamp(0.0, 1.0) * cover
        # (within [0, 1], the bound passing the gradient on: a plain clamp, like the cast
        # shadow's, left the occlusion out for good after one first step below 0)
        a = self.params["occlusion_strength"]
        a = a + (a.clamp(0.0, 1.0) - a).detach()
        return cast * (1.0 - a * ground.sphere_occlusion(points, hit, parts))

    def project(self) -> None:
        """Put the bounded values (:attr:`bounds`) back within their bounds after an
        optimiser step (projected descent): an early step below 0, taken while the body
        was still far from its target, otherwise left the occlusion out of a whole
        run."""
        with torch.no_grad():
            for name, (low, high) in self.bounds.items():
                if name in self.params:
                    self.params[name].clamp_(low, high)

    def free(self, name: str) -> torch.Tensor:
        """Which elements of the learned value ``name`` are free (bool, flat): not at a
        bound of :attr:`bounds`, nor a blur under :data:`BLUR_SHARP` (a sharp image,
        where the loss is flat in ``blur_sigma``), nor a :data:`MANY_VALUED` one (a column
        per cell would pass the uncertainty's limit and hold every nuisance value); the
        uncertainty holds the others."""
        x = self.params[name].detach().reshape(-1)
        low, high = self.bounds.get(name, (-float("inf"), float("inf")))
        ok = (x > low) & (x < high) & (name not in MANY_VALUED)
        if name == "blur_sigma":
            ok &= x.abs() > BLUR_SHARP
        return ok

    def settle_blur(self) -> None:
        """After the frame-0 calibration: a blur under :data:`BLUR_SHARP` is a sharp
        image, set to exactly 0."""
        if "blur" in self.kinds and abs(float(self.params["blur_sigma"].detach())) < BLUR_SHARP:
            with torch.no_grad():
                self.params["blur_sigma"].zero_()

    def blur(self, frames: torch.Tensor) -> torch.Tensor:
        """``frames [F, H, W, C]`` as the camera blurs them (unchanged without the kind
        ``blur``)."""
        if "blur" not in self.kinds or frames.dim() < 4:
            return frames
        if float(self.params["blur_sigma"].detach()) == 0.0:
            return frames  # (exact: the identity, and a derivative of 0 at 0)
        return heat_blur_frames(frames, self.params["blur_sigma"] ** 2)

    def response(self, linear: torch.Tensor) -> torch.Tensor:
        """The camera's response to linear light (unchanged without the kind
        ``response``): ``(1 + c) x^(1/gamma) - c``."""
        if "response" not in self.kinds:
            return linear
        c = self._offset()
        return (1.0 + c) * self._power(linear) - c

    def linear(self, recorded: torch.Tensor) -> torch.Tensor:
        """The linear light that :meth:`response` records as ``recorded`` (its inverse;
        unchanged without the kind ``response``)."""
        if "response" not in self.kinds:
            return recorded
        g = self.params["gamma"].clamp(*GAMMA_RANGE)
        c = self._offset()
        top = RESPONSE_FLOOR ** (1.0 / g)  # x^(1/gamma) at the floor
        base = ((recorded + c) / (1.0 + c)).clamp(min=top)
        return torch.where(recorded > (1.0 + c) * top - c, base ** g,
                           (recorded + c) / ((1.0 + c) * top / RESPONSE_FLOOR))

    def _offset(self) -> torch.Tensor:
        """The response's offset ``c``, within :data:`RESPONSE_OFFSET_RANGE`."""
        return self.params["response_offset"].clamp(*RESPONSE_OFFSET_RANGE)

    def _power(self, linear: torch.Tensor) -> torch.Tensor:
        """``x^(1/gamma)``, below :data:`RESPONSE_FLOOR` linear."""
        g = self.params["gamma"].clamp(*GAMMA_RANGE)
        x = linear.clamp(min=RESPONSE_FLOOR)
        return torch.where(linear > RESPONSE_FLOOR, x ** (1.0 / g),
                           linear * RESPONSE_FLOOR ** (1.0 / g - 1.0))

    def solve_background(self, rgb0, w, frame_ids) -> torch.Tensor:
        """The background ``[H, W, 3]``, in linear light, that best explains the compared
        frames (through the response's inverse, :meth:`linear`) given the objects'
        premultiplied linear colour ``rgb0`` and the weight ``w`` the background shows
        with (``1 - coverage``, darkened by the shadow), or the plate."""
        if self.plate is not None:
            return self.linear(self.plate)
        data = self.linear(self.target[torch.as_tensor(frame_ids,
                                                       device=self.target.device)]) - rgb0
        c = torch.ones_like(data)
        prior = self.linear(self.median)
        for _ in range(1 + (ROBUST_STEPS if self.robust_eps else 0)):
            num = (c * w * data).sum(0) + BACKGROUND_PRIOR * prior
            bg = num / ((c * w * w).sum(0) + BACKGROUND_PRIOR)
            if self.robust_eps:
                # the robust loss's own weights (iteratively reweighted least squares):
                # a shadow that passes over a pixel does not darken its background
                e = self.robust_eps
                c = (e / torch.sqrt((data - w * bg) ** 2 + e * e)).detach()
        self.background = self.response(bg).detach()  # as the video shows it
        return bg

    # ---- the render ----------------------------------------------------------------------
    def render(self, outputs, frame_ids=None, coverage: bool = False) -> torch.Tensor:
        """:meth:`Scene.render <gradsim_taichi.scenes.Scene.render>` with the nuisance
        parameters applied."""
        scene = self.scene
        if frame_ids is None:
            frame_ids = torch.arange(scene.frames + 1)
        verts = scene.posed_vertices(outputs, frame_ids)
        camera, lights, meshes = self.camera(), self.lights(), self.meshes()
        moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
        shaded = "shadow" in self.kinds or "bounce" in self.kinds
        if not moving and ("background" in self.kinds or shaded):
            raise ValueError(f"fit {','.join(self.kinds)} needs simulated objects to draw")
        shade = self.shadow(camera, meshes, verts, moving)
        if "background" not in self.kinds:
            # (the sun's shadows on the objects, as the scene's own render draws them)
            r = self._renderer(camera, meshes, lights, scene.renderer.background, moving)
            cov = None
            if (coverage or shaded) and moving:
                cov = self._renderer(camera, [meshes[k] for k in moving], [], (0.0, 0.0, 0.0))
            if not shaded:
                return self.as_seen(scene.render_with(r, cov, verts, coverage))
            out = scene.render_with(r, cov, verts, True)
            alpha = out[..., 3:]
            # the stage darkened where the shadow falls and no object covers it
            rgb = out[..., :3] * (1.0 - (1.0 - shade) * (1.0 - alpha))
            return self.as_seen(torch.cat([rgb, alpha if coverage else torch.ones_like(alpha)],
                                          -1))
        drawn_with = [t for n, t in self.params.items() if n not in AFTER_THE_LAYER]

        def draw_layer():
            r = self._renderer(camera, [meshes[k] for k in moving], lights, (0.0, 0.0, 0.0),
                               True)
            return r([verts[k] for k in moving])
        # The objects' layer is composited over the background, darkened by the shadow,
        # in linear light, and the camera's response applied to the sum: a pixel the
        # body's edge half covers records response(mix), not the mix of two responses
        # (on an sRGB curve they differ by up to ~0.07 of white at an edge). The
        # background is solved in linear light too, as the video shows it (blurred).
        out = self.blur(self.last_layer.get(
            [*_pose(camera), *drawn_with, *(verts[k] for k in moving)], draw_layer))
        alpha = out[..., 3:]
        w = (1.0 - alpha) * self.blur(shade)
        layer = out[..., :3]
        rgb = self.response(layer + w * self.solve_background(layer, w, frame_ids))
        return torch.cat([rgb, alpha if coverage else torch.ones_like(alpha)], -1)

    def as_seen(self, frames: torch.Tensor) -> torch.Tensor:
        """Linear RGBA frames as the camera records them: blurred, then its response
        on the colour (see :meth:`blur`, :meth:`response`)."""
        frames = self.blur(frames)
        if "response" not in self.kinds:
            return frames
        return torch.cat([self.response(frames[..., :3]), frames[..., 3:]], -1)

    def report(self) -> dict:
        """JSON-ready estimates (the background as its mean colour; the image itself is
        :attr:`background`)."""
        out = {n: t.detach().cpu().tolist() for n, t in self.params.items()}
        if self.background is not None:
            out["background"] = {
                "source": "plate" if self.plate is not None else "solved per pixel",
                "mean_rgb": self.background.mean((0, 1)).cpu().tolist()}
        return out

