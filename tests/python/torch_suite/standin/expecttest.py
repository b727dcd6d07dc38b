"""The part of expecttest that torch's test utilities need, for the runner.

torch/testing/_internal/common_utils.py imports expecttest (a pip package
Debian 12 does not ship) for two names: ACCEPT, a flag, and TestCase, the
base of torch's own TestCase. The runner puts this directory on sys.path
only when the real package is missing. DistributedTest makes no inline
expectation; the one assertion here compares as expecttest does and never
rewrites a source file (ACCEPT stays False).
"""

import textwrap
import unittest

ACCEPT = False


def _normalize(expect):
    # expecttest's convention: a literal that opens with a newline is
    # written indented under the call; its text is the dedented rest.
    if expect.startswith("\n"):
        return textwrap.dedent(expect[1:])
    return expect


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertMultiLineEqual(_normalize(expect), actual)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        with self.assertRaises(exc_type) as ctx:
            callable(*args, **kwargs)
        self.assertExpectedInline(str(ctx.exception), expect)
