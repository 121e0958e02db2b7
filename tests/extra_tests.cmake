# Python tests of the evaluator (CPU mode), labelled `eval` (.ci/run runs them a second time with
# ATEN_CPU_CAPABILITY=default), and GPU checks.
if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/eval")
  add_test(NAME eval.python
           COMMAND ${KAGENT_TEST_PYTHON} -m unittest discover -s tests/eval -v
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(eval.python PROPERTIES LABELS eval
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/src/gpu/eval;KAGENT_BUILD_DIR=${CMAKE_BINARY_DIR}"
    SKIP_RETURN_CODE 77 TIMEOUT 900)
endif()

# GPU checks: each exits 77 (skipped) where no GPU exists; labelled `gpu`.
file(GLOB KAGENT_GPU_CHECKS CONFIGURE_DEPENDS
     "${CMAKE_CURRENT_SOURCE_DIR}/gpu/*_check.py" "${CMAKE_CURRENT_SOURCE_DIR}/gpu/*_check.sh")
foreach(check IN LISTS KAGENT_GPU_CHECKS)
  get_filename_component(name "${check}" NAME_WE)
  if(check MATCHES "\\.sh$")
    add_test(NAME gpu.${name} COMMAND bash ${check} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  else()
    add_test(NAME gpu.${name} COMMAND ${KAGENT_TEST_PYTHON} ${check} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  endif()
  set_tests_properties(gpu.${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "PYTHONPATH=${CMAKE_SOURCE_DIR}/src/gpu/eval;KAGENT_BUILD_DIR=${CMAKE_BINARY_DIR};KAGENT_BIN=$<TARGET_FILE:kagent-rt>")
endforeach()

# Slurm checks: each starts its own single-node Slurm (slurm-wlm, munge) and exits 77 (skipped)
# where those packages are missing; labelled `slurm`.
file(GLOB KAGENT_SLURM_TESTS CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/slurm/*_test.sh")
foreach(check IN LISTS KAGENT_SLURM_TESTS)
  get_filename_component(name "${check}" NAME_WE)
  add_test(NAME slurm.${name} COMMAND bash ${check} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(slurm.${name} PROPERTIES LABELS slurm SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "KAGENT_PYTHON=${KAGENT_TEST_PYTHON};KAGENT_BUILD_DIR=${CMAKE_BINARY_DIR};KAGENT_BIN=$<TARGET_FILE:kagent-rt>")
endforeach()

# The HTML reports in headless Chromium (tests/browser/): skipped (77) without chromium, node and
# playwright-core (scripts/setup.sh --tests installs them); screenshots in build/test-output/browser/.
add_test(NAME browser.report_pages COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/browser/browser_test.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(browser.report_pages PROPERTIES LABELS browser SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "KAGENT_PYTHON=${KAGENT_TEST_PYTHON};KAGENT_BUILD_DIR=${CMAKE_BINARY_DIR};KAGENT_BIN=$<TARGET_FILE:kagent-rt>")
# two policies over three problems, live then replayed: longer than the other specs
set_tests_properties(lua.compare_cpu_spec PROPERTIES TIMEOUT 900)
# five policies run and resumed, then a kill and a move: some 50 s a case on a loaded 2-core machine
set_tests_properties(lua.agent_resume_cpu_spec PROPERTIES TIMEOUT 900)
# three processes' "x eager" compared: alone, so the other tests' load does not move one of them
set_tests_properties(lua.figures_agree_cpu_spec PROPERTIES RUN_SERIAL ON TIMEOUT 1200)

# scripts/setup.sh's package lists against the README and .ci/run (no package only tests need
# in the plain setup)
add_test(NAME tools.setup_lists COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/setup_lists_test.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME tools.examples_provenance COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/examples_provenance_test.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME tools.license_files COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/license_files_test.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME tools.file_length COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/file_length_test.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
add_test(NAME lint.luacheck COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/luacheck_test.sh WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lint.luacheck PROPERTIES SKIP_RETURN_CODE 77)
