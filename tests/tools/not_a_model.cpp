// SPDX-License-Identifier: Apache-2.0
// A shared library that is not a kiln library: kiln-run must refuse it cleanly.
extern "C" int kiln_test_not_a_model() { return 42; }
