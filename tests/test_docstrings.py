"""The runnable examples in the docstrings of every module of the package."""

import doctest
import importlib
import inspect
import pkgutil

import pytest

import cakernels

PUBLIC = ["cakernels.svm", "cakernels.kernel_ridge", "cakernels.partition",
          "cakernels.backends", "cakernels.datasets"]


def _modules():
    names = ["cakernels"]
    for info in pkgutil.walk_packages(cakernels.__path__, "cakernels."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def _method_examples():
    """The doctests in the methods of the public classes. The public modules set the
    classes' ``__module__`` to themselves, so ``testmod`` of the private module skips
    the classes and ``testmod`` of the public one skips their methods (whose globals
    are the private module's): collected here, with each method's own globals."""
    import inspect

    import cakernels.model_selection  # noqa: F401 - among the public modules

    finder, tests, seen = doctest.DocTestFinder(recurse=False), [], set()
    for public in ["cakernels", *PUBLIC, "cakernels.model_selection"]:
        module = importlib.import_module(public)
        for name in module.__all__:
            cls = getattr(module, name)
            if not inspect.isclass(cls) or id(cls) in seen:
                continue
            seen.add(id(cls))
            for klass in cls.__mro__:  # inherited from the package's private bases too
                if not klass.__module__.startswith("cakernels"):
                    continue
                for attr, value in vars(klass).items():
                    func = value.fget if isinstance(value, property) else value
                    func = getattr(func, "__func__", func)  # class and static methods
                    if inspect.isfunction(func) and func.__doc__ and id(func) not in seen:
                        seen.add(id(func))  # once, in the first class that has it
                        tests += finder.find(func, f"{cls.__name__}.{attr}",
                                             globs=dict(func.__globals__))
    return [t for t in tests if t.examples]


def test_methods_examples_are_run():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _method_examples():
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize("public", PUBLIC)
def test_public_modules_have_examples(public):
    attempted = 0
    for name in MODULES:
        if name == public or name.startswith(public + "."):
            module = importlib.import_module(name)
            finder = doctest.DocTestFinder()
            attempted += sum(len(t.examples) for t in finder.find(module))
    assert attempted > 0, f"{public} has no runnable examples"


def _public_objects():
    """Every function and class that a public module exports in ``__all__``."""
    import inspect

    seen = {}
    for public in ["cakernels", *PUBLIC, "cakernels.model_selection"]:
        module = importlib.import_module(public)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj) or callable(obj):
                seen.setdefault(id(obj), (f"{public}.{name}", obj))
    return sorted(seen.values(), key=lambda pair: pair[0])


PUBLIC_OBJECTS = _public_objects()


@pytest.mark.parametrize("name, obj", PUBLIC_OBJECTS, ids=[n for n, _ in PUBLIC_OBJECTS])
def test_public_api_has_numpydoc_sections(name, obj):
    """numpydoc sections on everything exported: Parameters (when it takes
    any), Returns (functions), Examples (all but exceptions), and a docstring
    on every public method (its own or its base class's)."""
    import inspect

    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    doc = inspect.getdoc(target) or ""
    wanted = []
    if inspect.isclass(target):
        init = target.__init__
        takes = (inspect.isfunction(init) and init.__module__.startswith("cakernels")
                 and len(inspect.signature(init).parameters) > 1)
        # the class that wrote this __init__ (_own_init gives every subclass a copy)
        def _where(f):
            code = getattr(f, "__code__", None)
            return code and (code.co_filename, code.co_firstlineno)

        base = [b for b in target.__mro__ if _where(vars(b).get("__init__")) == _where(init)][-1]
        if takes and (base is target
                      or f"as :class:`{base.__name__}`" not in " ".join(doc.split())):
            # (a variant with its base's parameters may name the base instead)
            wanted.append("Parameters")
        if not issubclass(target, BaseException):
            wanted.append("Examples")
    else:
        if inspect.signature(obj).parameters:
            wanted.append("Parameters")
        wanted += ["Returns" if "Yields" not in doc else "Yields", "Examples"]
    for section in wanted:
        assert f"\n{section}\n{'-' * len(section)}\n" in doc, f"{name}: no {section} section"
    if inspect.isclass(target):  # its own methods and those of the package's bases
        for attr, value in inspect.getmembers(target):
            if attr.startswith("_"):
                continue
            if inspect.isfunction(value) or isinstance(inspect.getattr_static(target, attr),
                                                       property):
                assert inspect.getdoc(getattr(target, attr)), f"{name}.{attr} has no docstring"


def _documented_parameters(obj, undescribed=None):
    """The names in ``obj``'s Parameters section, in order (None without one);
    ``a, b : ...`` lines give each name. Entries with no indented description
    below are appended to ``undescribed``."""
    lines = inspect.cleandoc(inspect.getdoc(obj) or "").splitlines() + [""]
    if "Parameters" not in lines:
        return None
    names, i = [], lines.index("Parameters") + 2
    for line, below in zip(lines[i:], lines[i + 1:]):
        if line and not line.startswith(" "):
            if below.strip() and set(below.strip()) == {"-"}:
                break  # the next section
            entry = [n.strip() for n in line.split(" : ")[0].replace("\\", "").split(",")
                     if n.strip()]
            names += entry
            if undescribed is not None and not below.startswith(" "):
                undescribed += entry
    return names


SIGNED = [(n, o) for n, o in PUBLIC_OBJECTS if inspect.isfunction(o)
          or (inspect.isclass(o) and not issubclass(o, BaseException))]


@pytest.mark.parametrize("name, obj", SIGNED, ids=[n for n, _ in SIGNED])
def test_parameters_are_documented_in_the_signatures_order(name, obj):
    # numpydoc's PR01-PR03: every parameter, nothing else, in order (CascadeSVC's
    # n_passes came after verbose, DisSMOSVC's cache_size after working_set)
    sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj).parameters
    wanted = [p for p, v in sig.items() if p != "self" and v.kind not in (
        inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    undescribed = []
    documented = _documented_parameters(obj, undescribed)
    if documented is None:  # a front door: "parameters as :class:`...`"
        assert not wanted or "as :class:" in " ".join(inspect.getdoc(obj).split()), name
        return
    assert documented == wanted
    assert not undescribed, f"{name}: parameters without a description"  # numpydoc's PR07


def _documented_attributes(cls):
    """The names in ``cls``'s own Attributes section (None without one)."""
    import inspect

    lines = inspect.cleandoc(cls.__doc__ or "").splitlines() + [""]
    if "Attributes" not in lines:
        return None
    names, i = set(), lines.index("Attributes") + 2
    for line, below in zip(lines[i:], lines[i + 1:]):
        if line and not line.startswith(" "):
            if below.strip() and set(below.strip()) == {"-"}:
                break  # the next section
            names.update(n.strip() for n in line.split(":")[0].replace("\\", "").split(",")
                         if n.strip())
    return names


ESTIMATORS = [(n, o) for n, o in PUBLIC_OBJECTS
              if isinstance(o, type) and hasattr(o, "get_params") and hasattr(o, "fit")]


#: attributes documented as set only with some parameters (DCSVC's early prediction)
CONDITIONAL_ATTRIBUTES = {"DCSVC": {"layer_centers_", "layer_models_"}}


@pytest.mark.parametrize("name, cls", ESTIMATORS, ids=[n for n, _ in ESTIMATORS])
def test_fitted_attributes_are_documented(name, cls):
    # DCKRRCV's and CASVCCV's own lists left out refit_time_, scorer_, n_splits_, the
    # partitioning, n_features_in_ and feature_names_in_, which their fits set
    import inspect

    import pandas as pd
    from sklearn.base import is_classifier
    from sklearn.datasets import make_classification, make_regression

    documented = _documented_attributes(cls)
    if documented is None:  # a front door: "parameters and attributes as ..."
        assert "as :class:" in cls.__doc__
        return
    params = inspect.signature(cls.__init__).parameters
    kw = {k: v for k, v in (("n_partitions", 3), ("random_state", 0)) if k in params}
    est = cls(**kw)
    if "Partitioner" in cls.__name__:
        X, y = make_classification(200, 4, random_state=0)
        est.fit(pd.DataFrame(X, columns=list("abcd")))
    elif is_classifier(est):
        X, y = make_classification(200, 4, n_informative=3, n_redundant=0, n_classes=3,
                                   random_state=0)
        est.fit(pd.DataFrame(X, columns=list("abcd")), y)
    else:
        X, y = make_regression(200, 4, random_state=0)
        est.fit(pd.DataFrame(X, columns=list("abcd")), y)
    fitted = {a for a in vars(est) if a.endswith("_") and not a.startswith("_")}
    assert not fitted - documented, f"{name}: undocumented fitted attributes"
    # and every documented attribute is there after fit (properties count), except
    # those its docstring says are conditional
    absent = {a for a in documented - fitted if not hasattr(est, a)}
    assert absent <= CONDITIONAL_ATTRIBUTES.get(cls.__name__, set()), (name, absent)
