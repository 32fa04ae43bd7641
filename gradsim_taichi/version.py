"""The package's version: the one in pyproject.toml, as installed (no heavy imports)."""


def version() -> str:
    try:
        from importlib.metadata import version as installed

        return installed("gradsim-taichi")
    except Exception:  # not installed (running from a bare checkout)
        return "0+unknown"


__version__ = version()
