# lit configuration for Tetra's FileCheck tests. Test files mirror the source
# tree: test/dialect for dialect/, test/tools for the drivers.
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "Tetra"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".tetra"]
config.excludes = ["unit", "Inputs", "lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tetra_obj_root, "test")

config.substitutions.append(("%tetra_src_root", config.tetra_src_root))
config.substitutions.append(("%tetra_obj_root", config.tetra_obj_root))
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# The compile caches (CPU JIT, GPU code, step bundles) of the tests live in
# the build tree, not in the user's ~/.cache.
config.environment["TETRA_CACHE_DIR"] = os.path.join(
    config.tetra_obj_root, "test", "cache")
# `=` joins the characters that may not precede a tool name, so that
# `--stage=tetra` stays an argument.
llvm_config.add_tool_substitutions(
    [ToolSubst(tool, pre=r".-^/\<=") for tool in ["tetra", "tetra-opt", "tetra-run"]],
    [config.tetra_tools_dir])
