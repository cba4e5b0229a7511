# Writes OUT, a header defining JIRIKI_GIT_DESCRIBE (`git describe --tags --always --dirty --long` of
# SOURCE_DIR, or "unknown" outside a git checkout). Run at every build; the file is rewritten only
# when the text changes, so an unchanged tree recompiles nothing.
execute_process(COMMAND git describe --tags --always --dirty --long WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR describe STREQUAL "")
  set(describe "unknown")
endif()
set(text "#define JIRIKI_GIT_DESCRIBE \"${describe}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
