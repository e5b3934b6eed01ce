# What `make install` (cmake --install) puts where, and the Debian package `make package` builds
# from the same rules with CPack. Targets are named only: they are defined in their own folders.
include(GNUInstallDirs)

# kiln finds its helper next to itself or in ../libexec/kiln/ (default_helper_path in the CLI);
# the helper is not a command of its own, so it stays off PATH.
set(KILN_HELPER_DIR libexec/kiln)
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kiln-sandbox RUNTIME DESTINATION ${KILN_HELPER_DIR})

# kiln.nvim as a Neovim package: PREFIX/share/nvim/site is on Neovim's default 'packpath' for
# /usr and /usr/local (XDG_DATA_DIRS), so an installed Kiln is there without a plugin manager.
set(KILN_NVIM_DIR ${CMAKE_INSTALL_DATADIR}/nvim/site/pack/kiln/start/kiln.nvim)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/editor-plugins/nvim/ DESTINATION ${KILN_NVIM_DIR}
        PATTERN "*.png" EXCLUDE)

# The help tags :helptags would write (tests/install/check.sh compares them with Neovim's own), so
# :help kiln works in the installed package without a writable doc/ folder.
set(kiln_help ${PROJECT_SOURCE_DIR}/editor-plugins/nvim/doc/kiln.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${kiln_help})
file(STRINGS ${kiln_help} kiln_help_lines)
set(kiln_tags)
foreach(line IN LISTS kiln_help_lines)
  string(REGEX MATCHALL "(^|[ \t])\\*[^ \t*|]+\\*([ \t]|$)" found "${line}")
  foreach(tag IN LISTS found)
    string(STRIP "${tag}" tag)
    string(REGEX REPLACE "^\\*(.*)\\*$" "\\1" tag "${tag}")
    list(APPEND kiln_tags "${tag}\tkiln.txt\t/*${tag}*")
  endforeach()
endforeach()
list(SORT kiln_tags)
list(JOIN kiln_tags "\n" kiln_tags)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/nvim-doc/tags CONTENT "${kiln_tags}\n" @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nvim-doc/tags DESTINATION ${KILN_NVIM_DIR}/doc)

install(FILES ${PROJECT_SOURCE_DIR}/docs/install.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The Debian package: kiln and kiln-sandbox stripped, kiln.nvim, the docs. Depends comes from
# dpkg-shlibdeps (what the binaries link, with Debian's package names and minimum versions).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "MCP server for coding agents: workspaces, sandboxed runs, traces, publishing")
# The extended description, as Debian wants it: lines under 80 columns.
string(JOIN "\n" CPACK_PACKAGE_DESCRIPTION
  "Kiln serves the Model Context Protocol over stdio (kiln mcp), so that agents"
  "and editors can open a workspace, read and change its files, run commands in"
  "an isolated sandbox (kiln-sandbox: user, mount, pid and network namespaces,"
  "seccomp, cgroups), read the verification traces of those runs and publish"
  "results at a URL served by kiln serve."
  "Includes kiln.nvim, the Neovim plugin.")
set(KILN_PACKAGE_MAINTAINER "Kiln developers <dev@kiln.local>" CACHE STRING "Maintainer field of the Debian package")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${KILN_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
