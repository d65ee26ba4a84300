// The translation unit that builds the precompiled header every test binary
// reuses (tests/CMakeLists.txt: tern_test_pch); it holds no code.
