"""State that a failed ``fit`` leaves as it was (shared by the estimators, the
searches and the partitioners)."""

import functools

import numpy as np


def keeps_state_on_failure(fit):
    """Decorate an estimator's ``fit``: when it raises, the estimator is left as
    it was before the call (its parameters and, after an earlier fit, every
    fitted attribute: a refit that failed halfway had set the new data's
    ``classes_`` and ``n_features_in_`` next to the old models; a first fit
    that failed left attributes that made it look fitted)."""
    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        # a RandomState given as random_state is drawn from in place
        generators = {k: v.get_state() for k, v in before.items()
                      if isinstance(v, np.random.RandomState)}
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            for k, state in generators.items():
                before[k].set_state(state)
            raise
    return wrapper
