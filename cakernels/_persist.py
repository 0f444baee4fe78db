"""The cakernels version in a saved estimator's state.

scikit-learn records its own version in the pickles of its estimators
(``_sklearn_version``, for classes of its own modules only), so that loading one
with another version warns. A cakernels estimator saved with pickle, joblib or
skops recorded no version of cakernels, whose fitted state changes between
versions: :class:`VersionedState` adds ``_cakernels_version`` to the state and
warns (:class:`CakernelsVersionWarning`) when a state written by another version
is loaded. The version is not kept as an attribute of the loaded estimator.
"""

import warnings

__all__ = ["CakernelsVersionWarning", "VersionedState"]


class CakernelsVersionWarning(UserWarning):
    """An estimator saved by another cakernels version was loaded: its fitted
    state may not be what this version expects (refit it to be sure).

    Examples
    --------
    >>> import warnings
    >>> from cakernels import CakernelsVersionWarning
    >>> warnings.filterwarnings("ignore", category=CakernelsVersionWarning)
    """


class VersionedState:
    """Mixin (before ``BaseEstimator`` in the bases): the cakernels version in the
    pickled state, and a warning when a state of another version is loaded."""

    def __getstate__(self):
        from ._version import __version__

        get = getattr(super(), "__getstate__", None)
        state = get() if get is not None else self.__dict__.copy()
        if isinstance(state, dict):
            state = dict(state, _cakernels_version=__version__)
        return state

    def __setstate__(self, state):
        from ._version import __version__

        if isinstance(state, dict) and "_cakernels_version" in state:
            state = dict(state)
            saved = state.pop("_cakernels_version")
            if saved != __version__:
                # (one text for every estimator: the nested ones of a model, its
                # partitioner say, are one warning under the default filter)
                warnings.warn(
                    f"loading an estimator saved by cakernels {saved} with cakernels "
                    f"{__version__}: its fitted state may not be what this version expects "
                    "(refit it to be sure)", CakernelsVersionWarning, stacklevel=2)
        set_ = getattr(super(), "__setstate__", None)
        if set_ is not None:
            set_(state)
        else:  # pragma: no cover - BaseEstimator defines it
            self.__dict__.update(state)
