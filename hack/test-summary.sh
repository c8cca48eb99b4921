#!/usr/bin/env bash
# test-summary.sh passes `go test` output on stdin through to stdout as it
# comes and, when a test or a package failed, ends it with a summary: each
# failed package with why (its time, or build failed, a panic, a timeout and
# the tests then running) and its failed tests (the `--- FAIL` lines). It
# exits 0: run it as `go test ./... 2>&1 | hack/test-summary.sh` under
# `set -o pipefail`, and the pipeline keeps go test's exit code. It also ends
# with the packages that took longest, so a CI log shows where its time went.
exec awk '
{ print; fflush() }
timedout && /^\trunning tests:$/ { next }
timedout && /^\t\t[^ \t]/ { line = $0; sub(/^\t\t/, "", line); running = running (running == "" ? "" : ", ") line; next }
{ timedout = 0 }
/^[ \t]*--- FAIL: / { line = $0; sub(/^[ \t]*--- FAIL: /, "", line); tests[++ntests] = line; nfailed++; next }
/^panic: test timed out after / { why = substr($0, 8); timedout = 1; next }
/^panic: / && why == "" { line = substr($0, 8); sub(/ \[recovered.*\]$/, "", line); why = "panicked: " line; next }
/^(ok|FAIL)[ \t]+[^ \t]+[ \t]+[0-9.]+s$/ { took[$2] = $3 + 0 }
/^ok[ \t]/ { ntests = 0; why = ""; running = ""; next }
/^FAIL[ \t]/ {
	npkgs++
	rest = $0; sub(/^FAIL[ \t]+[^ \t]+[ \t]*/, "", rest)
	if (why != "") rest = rest " (" why (running == "" ? "" : ", running " running) ")"
	out[++nout] = "FAIL " $2 " " rest
	for (i = 1; i <= ntests; i++) out[++nout] = "    --- FAIL: " tests[i]
	ntests = 0; why = ""; running = ""
}
END {
	n = 0
	for (p in took) { names[++n] = p }
	for (i = 2; i <= n; i++) for (j = i; j > 1 && (took[names[j]] > took[names[j-1]] || took[names[j]] == took[names[j-1]] && names[j] < names[j-1]); j--) { t = names[j]; names[j] = names[j-1]; names[j-1] = t }
	if (n > 0) printf "\n=== slowest packages:\n"
	for (i = 1; i <= n && i <= 8; i++) printf "%7.0fs %s\n", took[names[i]], names[i]
	if (npkgs == 0 && nfailed == 0) exit 0
	for (i = 1; i <= ntests; i++) out[++nout] = "--- FAIL: " tests[i]
	printf "\n=== %d failed test(s) in %d failed package(s):\n", nfailed, npkgs
	for (i = 1; i <= nout; i++) print out[i]
}
'
