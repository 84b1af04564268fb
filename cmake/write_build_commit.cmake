# Writes OUT, a header defining SD_BUILD_COMMIT as the short commit of SOURCE_DIR ("unknown"
# outside a git checkout), and leaves the file untouched when that is what it already says.
set(commit unknown)
if(GIT)
  execute_process(COMMAND ${GIT} rev-parse --short HEAD
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE head
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND head)
    set(commit ${head})
  endif()
endif()
set(text "#define SD_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE ${OUT} "${text}")
