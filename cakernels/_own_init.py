"""Constructors named after their own class.

Most estimators inherit their ``__init__`` (``BKRR2`` DCKRR's, ``BKMSVC`` CASVC's), so
Python's error for a keyword they do not take named the parent:
``BKRR2(gamma=1)`` said ``DCKRR.__init__() got an unexpected keyword argument
'gamma'``. :class:`OwnInitName` gives every subclass that does not define
``__init__`` a copy of the inherited one named after the subclass (Python 3.11+
takes that name from the code object; 3.10 names only ``__init__()``). The copy is
the same function - code, defaults, signature and closure - so scikit-learn's
``get_params``, ``clone`` and ``super()`` behave exactly as before.
"""

import types

__all__ = ["OwnInitName"]


def _renamed(func, qualname):
    code = func.__code__
    if hasattr(code, "co_qualname"):  # Python 3.11+
        code = code.replace(co_qualname=qualname)
    new = types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__,
                             func.__closure__)
    new.__kwdefaults__ = func.__kwdefaults__
    new.__annotations__ = func.__annotations__
    new.__dict__.update(func.__dict__)
    new.__doc__ = func.__doc__
    new.__module__ = func.__module__
    new.__qualname__ = qualname
    return new


class OwnInitName:
    """Mixin: a subclass without its own ``__init__`` gets the inherited one under
    its own name (see the module docstring)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            inherited = cls.__init__
            if isinstance(inherited, types.FunctionType):
                cls.__init__ = _renamed(inherited, f"{cls.__qualname__}.__init__")
