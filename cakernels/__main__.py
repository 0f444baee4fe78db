"""``python -m cakernels`` and the ``cakernels`` console script (see :mod:`cakernels._cli`)."""

from ._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
