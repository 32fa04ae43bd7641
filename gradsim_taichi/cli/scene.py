"""``gradsim-taichi scene show PRESET``: a preset as a scene file, a starting point for
your own (see ``gradsim_taichi.scenes.scene_file``); and the ``--scene FILE`` option's
loading for ``estimate``."""

from gradsim_taichi.cli.common import CLIError


def add_scene_parser(sub, help_line: str) -> None:
    from gradsim_taichi.scenes import SCENES

    p = sub.add_parser("scene", help=help_line,
                       description="Scene files: TOML descriptions of a clip (objects, "
                                   "unknowns, pushes, camera, stage) for "
                                   "`gradsim-taichi estimate --scene FILE`.")
    actions = p.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print a preset as a scene file",
                              description="Print a preset as a scene file (TOML) on "
                                          "standard output; only the rigid presets are "
                                          "expressible so far.")
    show.add_argument("preset", help=f"one of: {', '.join(SCENES)}")
    show.add_argument("--shape", default=None,
                      help="the body's shape, for presets that have one (rigid-mass, "
                           "rigid-contact: box, cone, cylinder, lshape)")
    show.add_argument("--frames", type=int, default=None, help="override the frame count")
    show.add_argument("--resolution", type=int, default=None,
                      help="override the image size, square")
    show.set_defaults(func=cmd_scene_show)


def cmd_scene_show(args) -> int:
    from dataclasses import fields

    from gradsim_taichi.scenes import SCENES, make_scene
    from gradsim_taichi.scenes.scene_file import scene_to_toml

    if args.preset not in SCENES:
        raise CLIError(f"unknown scene {args.preset!r}; choose one of: {', '.join(SCENES)}")
    overrides = scene_overrides(args)
    if args.shape is not None:
        if "shape" not in {f.name for f in fields(SCENES[args.preset])}:
            raise CLIError(f"--shape: scene {args.preset!r} has no shape to choose")
        overrides["shape"] = args.shape
    try:
        text = scene_to_toml(make_scene(args.preset, **overrides))
    except ValueError as e:
        raise CLIError(str(e)) from None
    print(text, end="")
    return 0


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


def load_scene_arg(args, names=(), need_truth: bool = True):
    """The scene of ``--scene FILE`` with the ``--frames``/``--resolution`` overrides,
    ``names`` checked against its parameters. With ``need_truth`` (no target video
    given) every estimated unknown must have a ``true`` value in the file."""
    from gradsim_taichi.scenes.scene_file import load_scene_file

    if getattr(args, "shape", None) is not None:
        raise CLIError("--shape goes with a preset; a scene file gives its objects' shapes")
    try:
        scene = load_scene_file(args.scene_file, **scene_overrides(args))
        scene.check_params(names)
        scene.build_model()  # numpy only: the builder's checks, before any Taichi work
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(str(e)) from None
    except KeyError as e:
        raise CLIError(e.args[0]) from None
    if not scene.params:
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
