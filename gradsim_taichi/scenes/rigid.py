"""Rigid-body presets: the paper's Table 1 (mass) and Table 2 (mass and contact).

Each is a scene file shipped with the package (``gradsim_taichi/scenes/files/``:
``rigid-mass.toml``, ``rigid-contact.toml``; ``gradsim-taichi scene show PRESET`` prints
one): the body, its push, the unknowns with their guess ranges, the optimiser's schedule
and the body's shapes (``[shapes]``: box, cone, cylinder, lshape; ``--shape``) are all
in the file. ``RigidMass(shape=..., **overrides)`` and ``RigidContact(...)`` load them
into a :class:`~gradsim_taichi.scenes.scene_file.FileScene`.
"""

from gradsim_taichi.meshes import lshape_mesh  # noqa: F401 (its old home)
from gradsim_taichi.scenes.preset_files import FilePreset
from gradsim_taichi.scenes.registry import register

# a rigid body pushed by a known impulse, tumbling onto the ground; unknown mass
RigidMass = register(FilePreset("rigid-mass"))
# the same, pushed down and sideways: bouncing and sliding; unknown mass and contact
RigidContact = register(FilePreset("rigid-contact"))
SHAPES = RigidMass.shapes  # the shapes both offer (their files' [shapes] tables)
