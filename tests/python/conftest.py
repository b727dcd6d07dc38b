"""pytest setup: the package from the build tree (python/) and these helpers."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"), HERE]
