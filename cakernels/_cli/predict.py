"""``cakernels predict`` and ``cakernels evaluate``."""

import sys
import time

from .common import (
    CLIError,
    _atomic_write,
    _check_output,
    _fmt_int,
    _load_data,
    _load_model,
    _match_features,
    _value_list,
    _warn,
)

# --------------------------------------------------------------------------- predict / evaluate


def _prediction_lines(pred, task):
    import numpy as np

    pred = np.asarray(pred)
    if pred.dtype.kind not in "fiu":
        fmt = str
    else:
        pred = pred.astype(np.float64)
        integral = np.all(np.isfinite(pred)) and np.all(pred == np.round(pred))
        # class labels as integers ("-1", "1"); real values in the shortest exact form
        fmt = (lambda v: str(int(v))) if task == "classification" and integral else \
            (lambda v: repr(float(v)))
    if pred.ndim == 1:
        return [fmt(v) for v in pred]
    return [" ".join(fmt(v) for v in row) for row in pred]


def _predict_data(args):
    """The model and DATA read as the model's training data was: a LIBSVM file with the
    training file's index base (models without ``index_base`` decide it per file)."""
    model, meta = _load_model(args.model, trust_pickle=args.trust_pickle)
    base = meta.get("index_base")
    data = _load_data(args.data, split="test", index_base=base)
    n_features = int(meta["n_features"])
    dropped = data.read.dropped_index_0 if data.read is not None else 0
    if dropped:
        rows = data.X.shape[0]
        _warn(f"{data.label}: feature index 0 occurs in {_fmt_int(dropped)} of {_fmt_int(rows)} "
              f"rows, but the model was trained on a one-based file (features 1..{n_features}): "
              f"{'that entry was' if dropped == 1 else f'those {_fmt_int(dropped)} entries were'} "
              "dropped (if this file is zero-based, every feature is shifted by one for this "
              "model)")
    X = _match_features(data, n_features, base)
    X = _dense_for_centring(X, meta, data.label)
    _check_finite(X, data.label)
    return model, meta, data, X


def _check_finite(X, label):
    """NaN or infinite feature values: one line naming the file and the first row."""
    import numpy as np
    import scipy.sparse as sp

    values = X.data if sp.issparse(X) else X
    bad = ~np.isfinite(values)
    if not bad.any():
        return
    if sp.issparse(X):
        row = int(np.searchsorted(X.indptr, np.flatnonzero(bad)[0], side="right")) - 1
    else:
        row = int(np.flatnonzero(bad.any(axis=1))[0])
    n = int(bad.sum())
    raise CLIError(f"{label}: {_fmt_int(n)} feature value{' is' if n == 1 else 's are'} NaN "
                   f"or infinite (the first in sample {_fmt_int(row + 1)}); the model needs "
                   "finite values")


def _dense_for_centring(X, meta, label):
    """A sparse DATA (a LIBSVM file) for a model standardized with centring
    (fitted on dense data: a table, a demo): made dense, as the scaler needs
    (it refused sparse input), when that fits in memory."""
    import scipy.sparse as sp

    from .. import _memory

    if not (sp.issparse(X) and (meta.get("standardization") or {}).get("with_mean")):
        return X
    need, available = 8.0 * X.shape[0] * X.shape[1], _memory.limit_bytes()
    if available is not None and need > 0.5 * available:  # (None: not known here)
        raise CLIError(f"{label}: the model standardizes by centring (it was fitted on dense "
                       f"data), so this sparse file must be made dense first: "
                       f"{need / 2**30:.1f} GiB, more than half of the available memory; "
                       "predict smaller pieces of it")
    return X.toarray()


def _label_desc(values):
    k = len(values)
    return _value_list(values) if k <= 6 else f"{_fmt_int(k)} distinct values: {_value_list(values)}"


def _check_labels(model, meta, data, command):
    """A classifier's DATA with labels that are not classes of the model. ``evaluate``
    refuses data none of whose labels is a class (its accuracy would be 0), whose
    labels are as many as the classes but not the same (coded differently: 0/1 or 1/2
    for -1/+1, 0..9 for 1..10), or most of whose samples have labels that are not
    classes (a regression file some of whose targets equal a class), and warns when a
    minority of labels is unseen; ``predict``
    (which ignores the labels) warns in every case."""
    import numpy as np

    if meta.get("task") != "classification":
        return
    classes = meta.get("classes")
    if classes is None:
        classes = getattr(model, "classes_", None)
    if classes is None:
        return
    classes = np.unique(np.asarray(classes, dtype=np.float64))
    y = np.asarray(data.y, dtype=np.float64)
    unseen = ~np.isin(y, classes)
    n_unseen = int(np.count_nonzero(unseen))
    if not n_unseen:
        return
    labels, new = np.unique(y), np.unique(y[unseen])
    counts = f"{_fmt_int(n_unseen)} of {_fmt_int(y.size)} samples"
    if n_unseen == y.size:
        msg = (f"{data.label}: none of its labels ({_label_desc(labels)}) is a class of the "
               f"model ({_label_desc(classes)})")
        wrong = "every sample would count as wrong"
    elif labels.size == classes.size:
        msg = (f"{data.label}: its labels ({_label_desc(labels)}) are not the classes of the "
               f"model ({_label_desc(classes)}): {counts} have labels it never saw "
               f"({_label_desc(new)})")
        wrong = "those would all count as wrong"
    elif 2 * n_unseen > y.size:  # a regression file whose targets include a class value
        msg = (f"{data.label}: most of its labels are not classes of the model "
               f"({_label_desc(classes)}): {counts} have labels it never saw "
               f"({_label_desc(new)})")
        wrong = "those would all count as wrong"
    else:
        _warn(f"{data.label}: {counts} have labels the model never saw ({_label_desc(new)}; its "
              f"classes: {_label_desc(classes)})"
              + (": they count as errors in the accuracy" if command == "evaluate"
                 else "; predict ignores the labels"))
        return
    if command == "evaluate":
        raise CLIError(f"{msg}; {wrong} (labels coded differently, e.g. "
                       "0/1 for -1/+1, or not the data the model was trained for?)")
    _warn(f"{msg}; predict ignores the labels, but check that this is the right file")


def _cmd_predict(args):
    if args.output not in (None, "-"):
        _check_output(args.output, [args.model, args.data])
    model, meta, data, X = _predict_data(args)
    if args.output not in (None, "-"):
        _check_output(args.output, data.files)  # a registry name's own file
    _check_labels(model, meta, data, "predict")
    pred = model.predict(X)
    text = "\n".join(_prediction_lines(pred, meta.get("task"))) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _atomic_write(args.output, lambda fh: fh.write(text), binary=False)
    return 0


def _cmd_evaluate(args):
    import numpy as np

    model, meta, data, X = _predict_data(args)
    _check_labels(model, meta, data, "evaluate")
    t0 = time.perf_counter()
    pred = model.predict(X)
    seconds = time.perf_counter() - t0
    y = data.y
    if meta.get("task") != "classification":
        bad = int(np.sum(~np.isfinite(np.asarray(y, dtype=np.float64))))
        if bad:  # before any output: no half report
            raise CLIError(f"{data.label}: {_fmt_int(bad)} of {_fmt_int(y.size)} targets are NaN "
                           "or infinite; the MSE and R^2 need finite targets")
    print(f"model:      {meta.get('estimator', '?')} ({meta.get('method')}), trained on "
          f"{_fmt_int(meta.get('n_samples', 0))} samples x {meta['n_features']} features"
          + (", standardized" if meta.get("standardization") else "")
          + (", target centred" if (meta.get("standardization") or {}).get("target_centred")
             else ""))
    print(f"data:       {data.label}: {_fmt_int(X.shape[0])} "
          f"sample{'' if X.shape[0] == 1 else 's'}")
    if meta.get("task") == "classification":
        acc = float(np.mean(pred == y))
        print(f"accuracy:   {acc:.4f} ({_fmt_int(int(np.sum(pred == y)))}/{_fmt_int(y.size)})")
    else:
        from sklearn.metrics import mean_squared_error, r2_score

        print(f"MSE:        {mean_squared_error(y, pred):.6g}")
        r2 = f"{r2_score(y, pred):.4f}" if y.size > 1 else "n/a (one sample)"
        print(f"R^2:        {r2}")
    print(f"predict:    {seconds:.3f} s")
    return 0
