"""``gradsim-taichi scene show PRESET``: a preset as a scene file, a starting point for
your own (see ``gradsim_taichi.scenes.scene_file``); ``gradsim-taichi scene check FILE``:
a file checked and summarised; and the ``--scene FILE`` option's loading for
``estimate``."""

from gradsim_taichi.cli.common import CLIError


def add_scene_parser(sub, help_line: str) -> None:
    from gradsim_taichi.scenes import SCENES

    p = sub.add_parser("scene", help=help_line,
                       description="Scene files: TOML descriptions of a clip (objects, "
                                   "unknowns, pushes, camera, stage) for "
                                   "`gradsim-taichi estimate --scene FILE`.")
    actions = p.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print a preset as a scene file",
                              description="Print a preset's scene file (TOML) on "
                                          "standard output: the shipped file as written, "
                                          "or with --shape/--frames/--resolution the "
                                          "scene so changed.")
    show.add_argument("preset", help=f"one of: {', '.join(SCENES)}")
    show.add_argument("--shape", default=None,
                      help="the body's shape, for presets that have one (rigid-mass, "
                           "rigid-contact: box, cone, cylinder, lshape)")
    show.add_argument("--frames", type=int, default=None, help="override the frame count")
    show.add_argument("--resolution", type=int, default=None,
                      help="override the image size, square")
    show.set_defaults(func=cmd_scene_show)
    check = actions.add_parser("check", help="check a scene file and list its unknowns",
                               description="Read a scene file, check it (every key, the "
                                           "mesh files, the bodies) and list what it "
                                           "describes; exit 2 with the first error.")
    check.add_argument("file", help="the scene file (TOML)")
    check.add_argument("--shape", default=None,
                       help="check this variant of the file's [shapes] table instead")
    check.set_defaults(func=cmd_scene_check)


def cmd_scene_show(args) -> int:
    """The preset's shipped file as written (comments included); with --shape, --frames
    or --resolution the scene so changed, written out (:func:`scene_to_toml`)."""
    from gradsim_taichi.cli.common import make_preset
    from gradsim_taichi.scenes import SCENES
    from gradsim_taichi.scenes.preset_files import FilePreset
    from gradsim_taichi.scenes.scene_file_writer import scene_to_toml

    args.scene = args.preset
    scene = make_preset(args)  # checks the name and the overrides
    plain = args.shape is None and args.frames is None and args.resolution is None
    try:
        if plain and isinstance(SCENES[args.preset], FilePreset):
            text = SCENES[args.preset].text()
        else:
            text = scene_to_toml(scene)
    except ValueError as e:
        raise CLIError(str(e)) from None
    print(text, end="")
    return 0


def cmd_scene_check(args) -> int:
    from gradsim_taichi.scenes.scene_file_schema import rigid_damping

    args.scene_file = args.file
    scene = load_scene_arg(args, need_truth=False, need_unknowns=False)
    spec = scene.spec
    print(f"{scene.name}: {scene.frames} frames at {scene.fps:g} fps, {scene.substeps} "
          f"substeps, {scene.width}x{scene.height} px")
    for i, o in enumerate(spec["objects"]):
        if o["kind"] == "cloth":
            nx, ny = o["resolution"]
            print(f"  objects[{i}]: cloth {o['size'][0]:g} x {o['size'][1]:g} m, {nx}x{ny} "
                  f"cells, density {o['density']:g} kg/m^2")
            continue
        what = o.get("shape") or o["mesh"]
        if o["kind"] == "soft":
            print(f"  objects[{i}]: soft {what}, density {_show(o['density'])}, mu "
                  f"{_show(o['mu'])}, lambda {_show(o['lambda'])}")
            continue
        mass = o.get("mass", f"density {o.get('density')}")
        damping = "".join(f", {k} {v:g}" for k, v in rigid_damping(o).items())
        print(f"  objects[{i}]: {o['kind']} {what}, mass {_show(mass)}{damping}")
    for i, p in enumerate(spec["pushes"]):
        where = f"region {p['region']} of " if "region" in p else ""
        couple = f", torque {p['torque']}" if "torque" in p else ""
        print(f"  pushes[{i}]: {p['kind']} {p['vector']}{couple} on {where}"
              f"objects[{p['object']}]")
    if not scene.params:
        print("unknowns: none (make a value a table {unknown = true, ...} to estimate it)")
    for name, p in scene.params.items():
        if p.shape != ():  # per particle: the guesses are a density or a velocity
            print(f"unknown {name}: one per particle, guesses {p.low:g}..{p.high:g}")
            continue
        true = f", true {p.true:g}" if scene.truth_given[name] else ""
        print(f"unknown {name}: guesses {p.low:g}..{p.high:g}{true}")
    # the checks that need the built scene (the stage in front of the camera, ...): about
    # a second on the CPU
    try:
        scene.build()
    except ValueError as e:
        raise CLIError(str(e)) from None
    warnings = _start_warnings(scene)
    for w in warnings:
        print(f"warning: {w}")
    print("built: the model, the camera and the stage are consistent"
          + (" (but see the warnings above)" if warnings else ""))
    return 0


def _start_warnings(scene) -> list[str]:
    """Where the simulated objects start: wholly out of the camera's view, or below
    the ground (a scene that builds, but whose video cannot show the physics)."""
    import torch

    with torch.no_grad():
        first = scene.simulate(scene.true_values(scene.params), frames=1)
        verts = scene.posed_vertices(first, torch.tensor([0]))
    stage = scene.spec["stage"]
    out = []
    for k, part in enumerate(scene.parts):
        if part.static_vertices is not None:
            continue
        v = verts[k][0]
        uv, z = scene.camera.project(v)
        seen = ((z > 0) & (uv[:, 0] >= 0) & (uv[:, 0] <= scene.width) & (uv[:, 1] >= 0)
                & (uv[:, 1] <= scene.height))
        if not bool(seen.any()):
            out.append(f"simulated part {k} starts wholly out of the camera's view")
        low = float(v[:, 1].min())
        if stage["ground"] and low < stage["height"] - 1e-6:
            out.append(f"simulated part {k} starts below the ground (its lowest point at "
                       f"y = {low:.3g}, the ground at {stage['height']:g})")
    return out


def _show(value) -> str:
    if isinstance(value, dict):
        each = " per particle" if value["unknown"] != True else ""  # noqa: E712
        return f"unknown{each} ({value['guess_low']:g}..{value['guess_high']:g})"
    return f"{value:g}" if isinstance(value, float) else str(value)


def scene_overrides(args) -> dict:
    """The overrides ``--frames`` and ``--resolution`` ask for, checked."""
    overrides = {}
    if getattr(args, "frames", None) is not None:
        if args.frames < 1:
            raise CLIError(f"--frames must be a positive integer; got {args.frames}")
        overrides["frames"] = args.frames
    if getattr(args, "resolution", None) is not None:
        if args.resolution < 8 or args.resolution % 2:
            raise CLIError(f"--resolution must be an even number >= 8; got {args.resolution}")
        overrides["width"] = overrides["height"] = args.resolution
    return overrides


def load_scene_arg(args, names=(), need_truth: bool = True, need_unknowns: bool = True):
    """The scene of ``--scene FILE`` with the ``--frames``/``--resolution`` overrides and
    ``--shape`` (a name of the file's ``[shapes]`` table), ``names`` checked against its
    parameters. With ``need_truth`` (no target video
    given) every estimated unknown must have a ``true`` value in the file; with
    ``need_unknowns`` the file must have some."""
    from gradsim_taichi.scenes.scene_file import load_scene_file

    try:
        scene = load_scene_file(args.scene_file, shape=getattr(args, "shape", None),
                                **scene_overrides(args))
        scene.check_params(names)
        scene.build_model()  # numpy only: the builder's checks, before any Taichi work
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(str(e)) from None
    except KeyError as e:
        raise CLIError(e.args[0]) from None
    size = (scene.spec["scene"]["width"], scene.spec["scene"]["height"])
    if getattr(args, "resolution", None) is not None and size[0] != size[1]:
        # (a square image of a wide camera would squash the view)
        raise CLIError(f"--resolution makes square images; {args.scene_file} draws "
                       f"{size[0]}x{size[1]}: change [scene] width and height in the file")
    if need_unknowns and not scene.params:
        raise CLIError(f"--scene {args.scene_file}: the file has no unknowns to estimate; "
                       "make a mass or contact value a table {unknown = true, guess_low = "
                       "..., guess_high = ...}")
    if need_truth:
        missing = [n for n in (names or scene.default_params) if not scene.truth_given[n]]
        if missing:
            raise CLIError(f"--scene {args.scene_file}: no --target video, and the file gives "
                           f"no true value for {', '.join(missing)} to render one from; give "
                           "--target VIDEO (or true = ... in the unknown's table)")
    return scene
