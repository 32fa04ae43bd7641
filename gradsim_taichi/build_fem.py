"""ModelBuilder methods for tetrahedral FEM solids.

Mixed into :class:`gradsim_taichi.builder.ModelBuilder`. Methods validate their input,
add particles through ``self.add_particles`` where needed, and register a factory in
``self._force_factories`` (a particle force model) or ``self._system_factories``
(a system of its own) that ``finalize()`` calls with the Model being built.
"""


class SoftBodyBuilderMixin:
    pass
