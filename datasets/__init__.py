"""Dataset registry shipped with cakernels (installed as ``cakernels._registry``)."""
