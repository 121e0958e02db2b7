# Install layout (cmake --install build --prefix P, or the .deb from `cpack -G DEB` in build/):
#   P/bin/kagent-rt
#   P/share/kagent-rt/{agents,skills,prompts,examples,types}/, eval/kagent_eval/ (the evaluator,
#     put on the workers' PYTHONPATH by kagent/gpu/worker.lua), demo.sh
#   P/share/doc/kagent-rt/          README and the scripting contract, LICENSE, CITATION.cff,
#                                   copyright (Debian's format); licenses/ of the Lua libraries
#                                   compiled in (argparse)
#   P/share/man/man1/kagent-rt.1, P/share/{bash-completion,zsh,fish}/...: generated from --help
#                                   and --completion (scripts/gen_man.lua, gen_completion.lua)
#   P/lib/libkagent_prof.so         when built (CUPTI; component profiler); the evaluator looks
#                                   in <prefix>/lib
#   P/lib/libkagent_core.a, P/include/kagent/, P/lib/cmake/kagent/ (component devel: embedding)
# The binary finds share/kagent-rt from its own location (src/runtime/util/root_dir.cpp), so the
# tree works wherever it is unpacked.
set(KAGENT_DATADIR "${CMAKE_INSTALL_DATADIR}/kagent-rt")

install(TARGETS kagent-rt RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT runtime)
install(DIRECTORY agents skills prompts examples types third_party
        DESTINATION "${KAGENT_DATADIR}" COMPONENT runtime
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(DIRECTORY src/gpu/eval/kagent_eval DESTINATION "${KAGENT_DATADIR}/eval" COMPONENT runtime
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
install(FILES src/gpu/eval/pyproject.toml src/gpu/eval/README.md
        DESTINATION "${KAGENT_DATADIR}/eval" COMPONENT runtime)
install(PROGRAMS scripts/demo.sh DESTINATION "${KAGENT_DATADIR}" COMPONENT runtime)
install(FILES README.md docs/lua-api.md docs/agents.md docs/install.md docs/sweeps.md docs/reports.md
        DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime)
# the licence of the command-line parser compiled into the binary (lua-argparse)
install(FILES "${CMAKE_BINARY_DIR}/licenses/argparse.copyright"
        DESTINATION "${CMAKE_INSTALL_DOCDIR}/licenses" COMPONENT runtime)
# the licence, how to cite, and the Debian copyright file (third-party licences stay beside their
# files: third_party/report/LICENSE.*, examples/problems/LICENSE.KernelBench, licenses/)
install(FILES LICENSE CITATION.cff packaging/copyright DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime)
# the man page and shell completion, generated from the binary's own --help and --completion
set(KAGENT_GEN "${CMAKE_BINARY_DIR}/generated")
file(GLOB KAGENT_ENTRY_POINTS CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/agents/*.lua" "${CMAKE_SOURCE_DIR}/agents/run/*.lua")
set(KAGENT_GEN_FILES "${KAGENT_GEN}/kagent-rt.1" "${KAGENT_GEN}/kagent-rt.bash" "${KAGENT_GEN}/_kagent-rt"
  "${KAGENT_GEN}/kagent-rt.fish")
add_custom_command(OUTPUT ${KAGENT_GEN_FILES}
  COMMAND ${CMAKE_COMMAND} -E make_directory "${KAGENT_GEN}"
  COMMAND $<TARGET_FILE:kagent-rt> --log-level warn --env-file /dev/null scripts/gen_man.lua "${KAGENT_GEN}/kagent-rt.1"
  COMMAND $<TARGET_FILE:kagent-rt> --log-level warn --env-file /dev/null scripts/gen_completion.lua bash "${KAGENT_GEN}/kagent-rt.bash"
  COMMAND $<TARGET_FILE:kagent-rt> --log-level warn --env-file /dev/null scripts/gen_completion.lua zsh "${KAGENT_GEN}/_kagent-rt"
  COMMAND $<TARGET_FILE:kagent-rt> --log-level warn --env-file /dev/null scripts/gen_completion.lua fish "${KAGENT_GEN}/kagent-rt.fish"
  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
  DEPENDS kagent-rt scripts/gen_man.lua scripts/gen_completion.lua ${KAGENT_ENTRY_POINTS}
  COMMENT "man page and shell completion from --help and --completion" VERBATIM)
add_custom_target(kagent_man_completion ALL DEPENDS ${KAGENT_GEN_FILES})
install(FILES "${KAGENT_GEN}/kagent-rt.1" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT runtime)
install(FILES "${KAGENT_GEN}/kagent-rt.bash" DESTINATION "${CMAKE_INSTALL_DATADIR}/bash-completion/completions"
        RENAME kagent-rt COMPONENT runtime)
install(FILES "${KAGENT_GEN}/_kagent-rt" DESTINATION "${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions" COMPONENT runtime)
install(FILES "${KAGENT_GEN}/kagent-rt.fish" DESTINATION "${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d"
        COMPONENT runtime)
if(TARGET kagent_prof)
  install(TARGETS kagent_prof LIBRARY DESTINATION lib COMPONENT profiler)
endif()

# ---- devel: kagent::core for programs that embed the runtime ------------------------------------
set_target_properties(kagent_core PROPERTIES EXPORT_NAME core)
set_target_properties(kagent_deps PROPERTIES EXPORT_NAME deps)
install(TARGETS kagent_core kagent_deps EXPORT kagentTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT devel)
install(DIRECTORY src/runtime/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/kagent" COMPONENT devel
        FILES_MATCHING PATTERN "*.hpp" PATTERN "lua_lib" EXCLUDE)
set(KAGENT_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/kagent")
install(EXPORT kagentTargets NAMESPACE kagent:: DESTINATION "${KAGENT_CMAKEDIR}" COMPONENT devel)
include(CMakePackageConfigHelpers)
configure_package_config_file(cmake/kagentConfig.cmake.in "${CMAKE_BINARY_DIR}/kagentConfig.cmake"
  INSTALL_DESTINATION "${KAGENT_CMAKEDIR}")
write_basic_package_version_file("${CMAKE_BINARY_DIR}/kagentConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/kagentConfig.cmake" "${CMAKE_BINARY_DIR}/kagentConfigVersion.cmake"
        DESTINATION "${KAGENT_CMAKEDIR}" COMPONENT devel)

# ---- .deb packages: kagent-rt (runtime), kagent-rt-dev (devel), kagent-rt-profiler (CUPTI) -------
set(CPACK_PACKAGE_NAME kagent-rt)
set(CPACK_PACKAGE_VENDOR "kagent-rt")
set(CPACK_PACKAGE_CONTACT "kagent-rt maintainers <kagent-rt@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LuaJIT runtime for LLM agents that optimize GPU kernels")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DIRECTORY "${CMAKE_BINARY_DIR}/packages")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime devel)
if(TARGET kagent_prof)
  list(APPEND CPACK_COMPONENTS_ALL profiler)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kagent-rt)
set(CPACK_DEBIAN_DEVEL_PACKAGE_NAME kagent-rt-dev)
set(CPACK_DEBIAN_PROFILER_PACKAGE_NAME kagent-rt-profiler)
# Shared-library dependencies (libc6, libcurl4, libssl3, libstdc++6...) come from dpkg-shlibdeps;
# the evaluator needs python3 with numpy, and torch (Debian's, or a venv's through KAGENT_PYTHON).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "python3 (>= 3.10), python3-numpy")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "python3-torch")
# kagent::core links LuaJIT, SQLite and yaml-cpp statically and needs these headers and CMake packages.
set(CPACK_DEBIAN_DEVEL_PACKAGE_DEPENDS
  "kagent-rt (= ${PROJECT_VERSION}), libluajit-5.1-dev, libsqlite3-dev, libyaml-cpp-dev, libcurl4-openssl-dev | libcurl-dev, libssl-dev, nlohmann-json3-dev, libspdlog-dev, libfmt-dev")
# libkagent_prof needs CUPTI and libcuda, which come with NVIDIA's toolkit and driver, not from
# Debian packages: no shlibdeps for it (GPU profiling reports ENOTSUP where they are missing).
set(CPACK_DEBIAN_PROFILER_PACKAGE_DEPENDS "kagent-rt (= ${PROJECT_VERSION})")
include(CPack)
