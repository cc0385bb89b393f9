# lit configuration for the GoogleTest units: every executable named *Tests in
# the build's test/unit folder is a suite; each TEST is a lit test.
import lit.formats

config.name = "Tetra-Unit"
config.suffixes = []
config.test_source_root = config.tetra_unit_dir
config.test_exec_root = config.tetra_unit_dir
config.test_format = lit.formats.GoogleTest(".", "Tests")
config.environment["TETRA_SOURCE_DIR"] = config.tetra_src_root
