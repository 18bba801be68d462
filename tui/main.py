"""The `evlab` console script. Headless commands go straight to sessions.cli, so they never
import Textual; the dashboard is imported only when it is asked for."""

import sys

from sessions import cli


def main(argv: list[str] | None = None) -> int:
    return cli.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
