"""``python -m gradsim_taichi.cli``: the same as the ``gradsim-taichi`` command."""

import sys

from gradsim_taichi.cli import main

sys.exit(main())
