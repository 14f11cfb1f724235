# lit configuration for LLVM's own tests of clang-offload-bundler and
# llvm-offload-binary, run once with LLVM 22's tools and once with cargo-offload's.
#
# Parameters (`lit --param NAME=VALUE`), written by run_llvm_tests.py:
#   settings   a JSON file: substitutions, features, target triple, and one PATH per tool set
#   tools      `llvm` (clang-22's own tools) or `ours` (cargo-offload behind tool-named wrappers)
#   exec_root  where the tests' Output directories go

import json
import os

import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from offload_lit_format import OffloadShTest  # noqa: E402

settings_path = lit_config.params.get("settings")
if not settings_path:
    lit_config.fatal("run through run_llvm_tests.py, which passes --param settings=FILE")
with open(settings_path) as f:
    settings = json.load(f)
tools = lit_config.params.get("tools", "llvm")
if tools not in ("llvm", "ours"):
    lit_config.fatal("--param tools must be `llvm` or `ours`, not %r" % tools)


config.name = "llvm-offload-tools-" + tools
config.test_format = OffloadShTest(execute_external=False)
config.suffixes = [".c", ".ll", ".test"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = lit_config.params["exec_root"]
config.target_triple = settings["target_triple"]
config.host_triple = settings["target_triple"]
config.available_features.update(settings["features"])
config.substitutions.extend(tuple(s) for s in settings["substitutions"])
config.environment["PATH"] = settings["path"][tools]
for name in ("HOME", "TMPDIR", "LANG", "LC_ALL"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
