"""Re-exports Bazel's native Java rules under rules_java's names (an offline stand-in for rules_java)."""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_runtime = native.java_runtime
java_toolchain = native.java_toolchain
