# -*- Python -*-
# The lit configuration of ZeroBubble MLIR's test suite.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "ZB"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zb_obj_root, "test")
# test/e2e holds pytest suites and the models they run, not lit tests.
config.excludes = ["Inputs", "e2e", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%zb_src_root", config.zb_src_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

config.zb_tools_dir = os.path.join(config.zb_obj_root, "bin")
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.zb_tools_dir, append_path=True)

# zb-run caches compiled models inside the build tree, not in $HOME.
config.environment["ZB_CACHE_DIR"] = os.path.join(config.zb_obj_root, "cache")

tool_dirs = [config.zb_tools_dir, config.llvm_tools_dir]
tools = ["zb-opt", "zb-sched", "zb-run"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
