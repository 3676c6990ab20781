"""Run an Estimator program with every Estimator's model_dir set to MODEL_DIR_ARG:

    python train_into.py PROGRAM.py MODEL_DIR

how the tests make a trained model_dir for a program that picks its own (a temporary one).
"""
import inspect
import os
import runpy
import sys

from tensorflow_estimator.python.estimator import estimator as estimator_lib

program, model_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
original = estimator_lib.Estimator.__init__
signature = inspect.signature(original)


def __init__(self, *args, **kwargs):
  bound = signature.bind(self, *args, **kwargs)
  config = bound.arguments.get("config")
  if config is not None and config.model_dir is not None:
    bound.arguments["config"] = config.replace(model_dir=model_dir)
  bound.arguments["model_dir"] = model_dir
  original(*bound.args, **bound.kwargs)


estimator_lib.Estimator.__init__ = __init__
os.chdir(os.path.dirname(program))
sys.path[0] = os.path.dirname(program)
sys.argv = [program]
runpy.run_path(program, run_name="__main__")
