# Packaging, editor support and hygiene: the .deb as a user installs it, the evaluator as a pip
# package, lua-language-server over the scripts, and no temporary folder left behind by any test.

add_test(NAME install.deb COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/deb_check.sh
         ${CMAKE_BINARY_DIR} ${KAGENT_TEST_PYTHON})
# Alone: its demo times kernels on the CPU, and a loaded CPU fails the evaluator's noise rules.
set_tests_properties(install.deb PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 RUN_SERIAL ON)

add_test(NAME install.pip COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/pip_check.sh ${KAGENT_TEST_PYTHON})
set_tests_properties(install.pip PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

add_test(NAME lua.luals_check COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/luals_check.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lua.luals_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# Every test runs with TMPDIR=build/test-tmp; the last one fails naming whatever is left there.
set(KAGENT_TEST_TMP "${CMAKE_BINARY_DIR}/test-tmp")
add_test(NAME tmp.setup COMMAND ${CMAKE_COMMAND} -E make_directory ${KAGENT_TEST_TMP})
add_test(NAME tmp.leftovers COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/tmp_leftovers.sh ${KAGENT_TEST_TMP})
set_tests_properties(tmp.setup PROPERTIES FIXTURES_SETUP test_tmp)
set_tests_properties(tmp.leftovers PROPERTIES FIXTURES_CLEANUP test_tmp)
get_property(kagent_all_tests DIRECTORY PROPERTY TESTS)
foreach(t IN LISTS kagent_all_tests)
  if(NOT t MATCHES "^tmp\\.")
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "TMPDIR=${KAGENT_TEST_TMP}")
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED test_tmp)
  endif()
endforeach()
