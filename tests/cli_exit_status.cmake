# Runs the ddlsim executable on a malformed scenario and checks: exit status 2, exactly
# one line on stderr naming the JSON path, nothing on stdout. Then the default scenario:
# exit status 0.
file(WRITE ${WORK}/malformed.json "{\"name\": \"x\", \"cluster\": {\"devices\": \"many\"}}")
execute_process(COMMAND ${DDLSIM} run ${WORK}/malformed.json
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "expected exit status 2, got ${status}")
endif()
if(NOT err STREQUAL "ddlsim run: cluster.devices: expected a positive integer, got \"many\"\n")
  message(FATAL_ERROR "unexpected stderr: ${err}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "unexpected stdout: ${out}")
endif()
execute_process(COMMAND ${DDLSIM} run RESULT_VARIABLE status OUTPUT_VARIABLE out)
if(NOT status EQUAL 0 OR NOT out MATCHES "ptd-p")
  message(FATAL_ERROR "default scenario: exit ${status}, output: ${out}")
endif()

# Determinism across processes: two runs of the real executable print identical bytes.
execute_process(COMMAND ${DDLSIM} run --json RESULT_VARIABLE s1 OUTPUT_VARIABLE first)
execute_process(COMMAND ${DDLSIM} run --json RESULT_VARIABLE s2 OUTPUT_VARIABLE second)
if(NOT s1 EQUAL 0 OR NOT s2 EQUAL 0 OR NOT first STREQUAL second)
  message(FATAL_ERROR "two runs of 'ddlsim run --json' differ (status ${s1}, ${s2})")
endif()
