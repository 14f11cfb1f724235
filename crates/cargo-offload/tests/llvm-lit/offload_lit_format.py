"""lit's shell test format with `%T`, for lit.cfg.py (a module of its own, so that lit's
worker processes can unpickle it)."""

import os

import lit.formats
import lit.TestRunner


class OffloadShTest(lit.formats.ShTest):
    """lit's shell test format, with `%T` (the test directory's `Output`), which the
    LLVM revisions of these tests still use and lit 22 no longer defines."""

    def execute(self, test, lit_config):
        output_dir = os.path.join(os.path.dirname(test.getExecPath()), "Output")
        return lit.TestRunner.executeShTest(
            test,
            lit_config,
            self.execute_external,
            [("%T", output_dir)] + list(self.extra_substitutions),
            self.preamble_commands,
        )
