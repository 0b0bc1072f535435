#!/usr/bin/env bats
# The lease audit with real processes: a job holds the one GPU of one.json
# through `visdev run`, and the fixture the audit reads names real pids on
# it, the job's own and others' (the fixture backend reads processes from
# the file; /proc says whose they are).

load helper

one() { "$VISDEV" --fixture "$FIXTURES/one.json" "$@"; }
# visdev reading the machine as the audit fixture ($BATS_TEST_TMPDIR/seen.json) has it
seen() { "$VISDEV" --fixture "$BATS_TEST_TMPDIR/seen.json" "$@"; }

# The GPU shows processes $1 (a JSON array of {pid, used_mib}), $2 MiB in use, $3 % utilisation.
gpu_shows() {
	jq --argjson p "$1" --argjson used "$2" --argjson util "$3" \
		'.gpus[0].processes = $p | .gpus[0].memory_used_mib = $used | .gpus[0].utilization_gpu = $util' \
		"$FIXTURES/one.json" >"$BATS_TEST_TMPDIR/seen.json"
}

# Leases the GPU to a job whose worker (a child, in the job's group) is $WORKER.
hold_gpu() {
	one run -q -- sh -c 'sleep 60 & echo $! >worker; wait' &
	wait_for test -s worker
	WORKER=$(cat worker)
	wait_for leased_to_job
	JOB=$(one leases --json | jq '.leases[0].pid')
}
leased_to_job() { [ "$(one leases --json | jq -r '.leases[0].command')" = "sh -c sleep 60 & echo \$! >worker; wait" ]; }

teardown() {
	pkill -KILL -f 'sleep 6[01]' 2>/dev/null
	two_users_cleanup
}

# Whether alice's `sleep 60` holds the lease (not visdev, in the moment before it starts).
alice_sleeps() { [ "$("$VISDEV" --fixture one.json leases --json | jq -r '.leases[0].command')" = "sleep 60" ]; }

# Whether process $1 runs as user $2.
owned_by() { [ "$(stat -c %U "/proc/$1")" = "$2" ]; }

@test "leases --audit: a process outside the job on its GPU is a squatter (exit 1); the job's own worker is not" {
	hold_gpu
	setsid sleep 61 &
	SQ=$!
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}, {\"pid\": $SQ, \"used_mib\": 2048}]" 3048 50
	run seen leases --audit
	assert_status 1
	assert_output_has "audit: squatter on GPU 0, leased to $(id -un): pid $SQ of $(id -un) (2.0 GiB), sleep 61"
	[ "${#lines[@]}" -eq 1 ]
	run seen leases
	assert_status 0
	[[ "${lines[1]}" == *"  squatted  sh -c sleep 60"* ]]
	run seen leases --json
	[ "$(jq -c '[.audit[] | .kind, .pid, .used_mib, .lease.pid]' <<<"$output")" = "[\"squatter\",$SQ,2048,$JOB]" ]
	[ "$(jq -c '.leases[0].audit' <<<"$output")" = '{"use":"active","quiet_s":null,"squatters":1,"unexplained_mib":0}' ]
	# list says it too, and so do the metrics
	run seen list
	assert_output_has "audit: squatter on GPU 0"
	run seen list --json
	[ "$(jq '.gpus[0].leases[0].audit.squatters' <<<"$output")" -eq 1 ]
	[ "$(jq '.audit[0].pid' <<<"$output")" -eq "$SQ" ]
	run seen list --format prometheus
	assert_output_has "visdev_audit_squatter_info{gpu=\"0\",uuid=\"GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b\",pid=\"$SQ\",user=\"$(id -un)\"} 1"
	assert_output_has 'visdev_audit_findings{kind="squatter"} 1'
	/usr/bin/python3 "$BATS_TEST_DIRNAME/promcheck.py" <<<"$output"
	# the squatter gone, nothing is found
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}]" 1000 50
	run seen leases --audit
	assert_status 0
	assert_output_has "no squatter, no unexplained memory, no lease idle for 30 minutes, in 1 lease"
}

@test "the audit through the stand-in NVML: its process list, /proc for whose each process is" {
	hold_gpu
	setsid sleep 61 &
	SQ=$!
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}, {\"pid\": $SQ, \"used_mib\": 512}]" 1512 50
	run mock "$BATS_TEST_TMPDIR/seen.json" leases --audit
	assert_status 1
	assert_output_has "audit: squatter on GPU 0, leased to $(id -un): pid $SQ of $(id -un) (0.5 GiB), sleep 61"
	[ "${#lines[@]}" -eq 1 ]
	run mock "$BATS_TEST_TMPDIR/seen.json" leases --json
	[ "$(jq -c '.leases[0].audit | [.use, .squatters]' <<<"$output")" = '["active",1]' ]
}

@test "leases --audit: memory in use on a leased GPU that no listed process explains" {
	hold_gpu
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}]" 7144 50
	run seen leases --audit
	assert_status 1
	assert_output_has "audit: 6.0 GiB in use on GPU 0, leased to $(id -un), that no listed process explains"
	run seen leases --json
	[ "$(jq '.audit[0].unexplained_mib' <<<"$output")" -eq 6144 ]
	# up to 1 GiB is the driver's own, not worth a word
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}]" 2000 50
	run seen leases --audit
	assert_status 0
}

@test "idle leases: quiet at every look for the threshold; a look that sees the job at work starts it again" {
	hold_gpu
	gpu_shows '[]' 0 0
	run seen leases --audit --idle 0.02
	assert_status 0
	run seen leases
	[[ "${lines[1]}" == *"  quiet "*"s  sh -c sleep 60"* ]]
	sleep 1.3
	run seen leases --audit --idle 0.02
	assert_status 1
	# quiet since the first look, 1.3 s and two commands ago
	[[ "$output" =~ "audit: idle lease on GPU 0: $(id -un)'s pid $JOB has not used it for "[1-9]"s: sh -c sleep 60" ]]
	run seen list --idle 0.02 --json
	[ "$(jq -r '.gpus[0].leases[0].audit.use' <<<"$output")" = idle ]
	[ "$(jq -r '.audit[0].kind' <<<"$output")" = idle_lease ]
	run seen list --idle 0.02
	[[ "$output" =~ "idle "[1-9]"s: nothing of its job at work on it at any look since" ]]
	# the look is this user's own, kept in XDG_STATE_HOME
	grep -q "^GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b	$JOB	" "$XDG_STATE_HOME/visdev/audit"
	# the job at work again (its worker on the GPU), then quiet: a new streak
	gpu_shows "[{\"pid\": $WORKER, \"used_mib\": 1000}]" 1000 0
	run seen leases --audit --idle 0.02
	assert_status 0
	gpu_shows '[]' 0 0
	run seen leases --audit --idle 0.02
	assert_status 0
	# utilisation alone, on a GPU the job has to itself, is the job at work
	gpu_shows '[]' 0 30
	sleep 1.3
	run seen leases --audit --idle 0.02
	assert_status 0
	run seen leases --json
	[ "$(jq -r '.leases[0].audit.use' <<<"$output")" = active ]
}

@test "the audit's memory: a damaged file is said and replaced; without HOME, idle is not judged" {
	hold_gpu
	gpu_shows '[]' 0 0
	mkdir -p "$XDG_STATE_HOME/visdev"
	printf 'junk\n' >"$XDG_STATE_HOME/visdev/audit"
	run seen leases --audit
	assert_status 0
	assert_output_has "visdev: $XDG_STATE_HOME/visdev/audit: line 1: not what visdev's audit keeps; starting afresh"
	[ "$(head -1 "$XDG_STATE_HOME/visdev/audit")" = "visdev-audit 1" ]
	run env -u HOME -u XDG_STATE_HOME "$VISDEV" --fixture seen.json leases --json --idle 0
	assert_output_has "idle leases are not judged: neither XDG_STATE_HOME nor HOME is set"
	[ "$(jq -r '.leases[0].audit.use' < <(env -u HOME -u XDG_STATE_HOME "$VISDEV" --fixture seen.json leases --json --idle 0 2>/dev/null))" = quiet ]
}

@test "leases --audit: a bad --idle and a machine without a driver are errors, not a clean bill" {
	run one leases --idle soon
	assert_status 2
	assert_output_has "--idle takes minutes, a number from 0 to 525600 (30 is the default), not 'soon'"
	run one leases --idle -1
	assert_status 2
	run "$VISDEV" leases --audit
	[ "$status" -ne 0 ]
	[ "$status" -ne 1 ] || false
	assert_output_has "no NVIDIA driver"
}

@test "two Unix users: bob's process on the GPU alice leased is a squatter, named as bob's" {
	two_users
	install -d -m 1777 out
	as_user visdev-alice "$VISDEV" --fixture one.json run -q -- sleep 60 &
	wait_for alice_sleeps
	JOB=$("$VISDEV" --fixture one.json leases --json | jq '.leases[0].pid')
	as_user visdev-bob sleep 61 &
	SQ=$!
	wait_for owned_by "$SQ" visdev-bob
	jq --argjson p "[{\"pid\": $JOB, \"used_mib\": 1000}, {\"pid\": $SQ, \"used_mib\": 512}]" \
		'.gpus[0].processes = $p | .gpus[0].memory_used_mib = 1512' one.json >seen.json
	run "$VISDEV" --fixture seen.json leases --audit
	assert_status 1
	assert_output_has "squatter on GPU 0, leased to visdev-alice: pid $SQ of visdev-bob (0.5 GiB), sleep 61"
	[ "${#lines[@]}" -eq 1 ]
}

@test "list --watch: the table again every SECONDS, as leases come; --json one object a line" {
	timeout 30 "$VISDEV" --fixture "$FIXTURES/one.json" list --watch 0.2 >watch.out &
	WATCH=$!
	wait_for grep -q '^  0  NVIDIA H100 80GB HBM3  free' watch.out
	hold_gpu
	wait_for grep -q '^  0  NVIDIA H100 80GB HBM3  leased' watch.out
	[ "$(grep -c '^-- .*, every 0.2s --$' watch.out)" -ge 2 ]
	kill "$WATCH"
	run timeout 2 "$VISDEV" --fixture "$FIXTURES/one.json" list --watch 0.2 --json
	[ "${#lines[@]}" -ge 3 ]
	for l in "${lines[@]}"; do
		[ "$(jq -r '.gpus[0].leases[0].user' <<<"$l")" = "$(id -un)" ]
	done
	run one list --watch 0
	assert_status 2
	assert_output_has "--watch takes seconds, a number from 0.1 to 86400, not '0'"
	run one list --watch 1 --format prometheus
	assert_status 2
}
