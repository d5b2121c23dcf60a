// The translation unit that akad_test_pch exists for: it makes the test programs' shared
// precompiled header (tests/CMakeLists.txt).
