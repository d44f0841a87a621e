"""`python -m seedpipe ARGS` and the `seedpipe` console script that
`pip install` puts on the environment's PATH: both run the `seedpipe` tool
bundled with the package (seedpipe/_native/seedpipe), or $SEEDPIPE_BIN, with
the same arguments, exit status and output (the process is replaced:
os.execv). `seedpipe help` lists the commands."""
import os
import sys


def _tool() -> str:
    """The bundled tool: $SEEDPIPE_BIN, `seedpipe` beside the library in
    use, or the package's _native/seedpipe. PATH is not searched: there
    the `seedpipe` found would be this console script itself."""
    env = os.environ.get("SEEDPIPE_BIN")
    if env:
        return env
    from . import _lib
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(os.path.dirname(os.path.abspath(_lib.LIB_PATH)), "seedpipe"),
              os.path.join(here, "_native", "seedpipe")):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise SystemExit("seedpipe: the bundled `seedpipe` tool was not found beside "
                     f"{_lib.LIB_PATH} nor in {os.path.join(here, '_native')}: reinstall the "
                     "package (pip install .), or set SEEDPIPE_BIN to a built tool")


def main() -> None:
    tool = _tool()
    try:
        os.execv(tool, ["seedpipe", *sys.argv[1:]])
    except OSError as e:
        raise SystemExit(f"seedpipe: cannot run {tool}: {e.strerror}")


if __name__ == "__main__":
    main()
