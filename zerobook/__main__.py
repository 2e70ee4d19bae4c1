"""`python -m zerobook doctor`: what this machine will do with the course (zerobook.doctor)."""

import sys

USAGE = "usage: python -m zerobook doctor"

if __name__ == "__main__":
    if sys.argv[1:] != ["doctor"]:
        sys.exit(USAGE)
    from zerobook.doctor import main

    sys.exit(main())
