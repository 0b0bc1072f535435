#!/usr/bin/env bats
# Waiting in line: first come, first served across processes and users, holds
# and backfill, a waiter that dies or runs out of time, and garbage in the line.
# Real processes, real flock, real signals; no timed assertions.

load helper

v() { "$VISDEV" --fixture "$FIXTURES/${FIX:-eight}.json" "$@"; }
# the same, as the process itself: for `&`, so that $! is visdev's pid
vx() { exec "$VISDEV" --fixture "$FIXTURES/${FIX:-eight}.json" "$@"; }

# The number of requests in line, and of live leases.
in_line() { [ "$(v leases --json | jq '.line | length')" -eq "$1" ]; }
leased() { [ "$(v leases --json | jq '.leases | length')" -eq "$1" ]; }

# Leases every GPU of the fixture to its own `sleep 60`.
hold_all() {
	local n
	n=$(jq '.gpus | length' "$FIXTURES/${FIX:-eight}.json")
	for _ in $(seq "$n"); do
		v run -q -n 1 -- sleep 60 &
	done
	wait_for leased "$n"
}

# Ends one of those leases: kills its job, and waits until the lease is gone.
release() {
	local pids pid
	pids=$(v leases --json | jq -r '.leases[] | select(.command == "sleep 60") | .pid')
	for pid in $pids; do
		kill "$pid" 2>/dev/null || continue
		wait_for eval "! v leases --json | jq -e '.leases[] | select(.pid == $pid)' >/dev/null"
		return
	done
	return 1
}

teardown() {
	# shellcheck disable=SC2086 # a list of pids
	[ -z "${BG:-}" ] || pkill -P "$(echo $BG | tr ' ' ',')" 2>/dev/null
	for pid in $(v leases --json 2>/dev/null | jq -r '.leases[].pid'); do
		kill "$pid" 2>/dev/null
	done
	two_users_cleanup
}

@test "an earlier -n 4 holds the GPUs that free for it: later -n 1 requests cannot take them" {
	hold_all
	v run -n 4 --wait -- sh -c 'echo four >>log' 2>four.err &
	wait_for in_line 1
	for i in 1 2 3; do
		v run -n 1 --wait -- sh -c 'echo one >>log' 2>/dev/null &
		wait_for in_line $((i + 1))
	done
	run v leases --json
	[ "$(jq -c '[.line[] | .n]' <<<"$output")" = '[4,1,1,1]' ]
	[ "$(jq -c '[.line[] | .place]' <<<"$output")" = '[1,2,3,4]' ]
	release
	release
	release
	wait_for eval '[ "$(v leases --json | jq ".line[0].holds | length")" -eq 3 ]'
	# three GPUs are free, but held for the -n 4: no later request took one
	[ ! -e log ]
	run v run -- true
	assert_status 3
	assert_output_has "held for $(id -un), waiting in line"
	run v pick
	assert_status 3
	assert_output_has "held for $(id -un), waiting in line"
	run v leases
	assert_output_has "waiting in line, first come first served:"
	release
	wait_for eval 'grep -q four log'
	[ "$(head -n1 log)" = four ]
	grep -q "got GPU" four.err
	# the rest as GPUs free
	for _ in 1 2 3 4; do release; done
	wait_for eval '[ "$(wc -l <log)" -eq 4 ]'
	wait_for in_line 0
}

@test "an earlier -n 8 starts before a later -n 1" {
	hold_all
	v run -n 8 --wait -- sh -c 'echo eight >>log' 2>/dev/null &
	wait_for in_line 1
	v run -n 1 --wait -- sh -c 'echo one >>log' 2>/dev/null &
	wait_for in_line 2
	for _ in 1 2 3 4 5 6 7 8; do release; done
	wait_for eval '[ "$(wc -l <log 2>/dev/null)" -eq 2 ]'
	[ "$(cat log)" = "$(printf 'eight\none')" ]
}

@test "the starvation case: ten loops of 1-GPU jobs do not keep a 4-GPU job waiting" {
	for i in $(seq 10); do
		(while [ ! -e stop ]; do
			v run -q -n 1 --wait -- sh -c 'echo x >>ran; sleep 0.3'
		done) &
	done
	wait_for eval '[ "$(wc -l <ran 2>/dev/null)" -ge 8 ]'
	before=$(wc -l <ran)
	run timeout 60 "$VISDEV" --fixture "$FIXTURES/eight.json" run -n 4 --wait -- true
	touch stop
	assert_status 0
	assert_output_has "got GPU"
	# the loops were running meanwhile
	[ "$(wc -l <ran)" -gt "$before" ]
	wait
}

@test "backfill: a waiter for a T4 does not hold up requests that only other GPUs serve" {
	FIX=mixed
	v run -q --model T4 -- sleep 60 &
	wait_for leased 1
	v run --model T4 --wait -- touch t4 2>/dev/null &
	wait_for in_line 1
	# another model, at once, and any GPU the T4 waiter cannot use
	run v run --model A6000 -- true
	assert_status 0
	run v run -n 1 -- true
	assert_status 0
	# but not the T4 itself, once it frees: that goes to the one waiting for it
	release
	wait_for test -e t4
	wait_for in_line 0
}

@test "kill -9 of a waiter frees its place at once, and the next in line moves up" {
	FIX=one
	hold_all
	vx run --wait -- touch first 2>/dev/null &
	first=$!
	wait_for in_line 1
	vx run --wait -- touch second 2>/dev/null &
	second=$!
	wait_for in_line 2
	kill -KILL "$first"
	wait "$first" || true
	run v leases --json
	[ "$(jq '.line | length' <<<"$output")" -eq 1 ]
	[ "$(jq '.line[0].pid' <<<"$output")" -eq "$second" ]
	[ "$(jq '.line[0].place' <<<"$output")" -eq 1 ]
	release
	wait_for test -e second
	[ ! -e first ]
}

@test "--wait=SECONDS leaves the line when its time runs out" {
	FIX=one
	hold_all
	run timeout 30 "$VISDEV" --fixture "$FIXTURES/one.json" run --wait=1 -- true
	assert_status 3
	assert_output_has "place 1 of 1 in line"
	assert_output_has "waited long enough"
	in_line 0
	[ -z "$(ls "$VISDEV_LEASE_DIR" | grep '^wait\.')" ]
}

@test "garbage in the line is survived and named" {
	FIX=one
	v leases >/dev/null
	ln -s /etc/passwd "$VISDEV_LEASE_DIR/wait.5.json"
	echo junk >"$VISDEV_LEASE_DIR/wait.7.json"
	flock "$VISDEV_LEASE_DIR/wait.7.json" sleep 60 &
	BG="$BG $!"
	printf '{"ticket": 9, "pid": 1, "since": 0, "n": 1, "mem_mib": 0, "min_free_mib": 0, "max_util": -1, "policy": "most-free", "model": null, "within": null, "command": "cheat"}\n' \
		>"$VISDEV_LEASE_DIR/wait.9.json"
	flock "$VISDEV_LEASE_DIR/wait.9.json" sleep 60 &
	BG="$BG $!"
	wait_for eval '! flock -n "$VISDEV_LEASE_DIR/wait.9.json" true'
	run v leases
	assert_status 0
	assert_output_has "wait.5.json ($(id -un)): a symbolic link: ignored"
	assert_output_has "wait.7.json ($(id -un)): not a line record: ignored"
	assert_output_has "wait.9.json ($(id -un)): it claims a place older than its file: ignored"
	run v leases --json
	[ "$(jq '.line | length' <<<"$output")" -eq 0 ]
	[ "$(jq '.line_ignored | length' <<<"$output")" -eq 3 ]
	# and the line works around them
	run v run --wait=10 -- true
	assert_status 0
}

@test "two Unix users in one line: the one who came first is served first" {
	two_users
	install -d -m 1777 out
	FIXTURES=$SHARED
	as_user visdev-alice "$VISDEV" --fixture one.json run -q -- sleep 60 &
	wait_for leased 1
	as_user visdev-bob "$VISDEV" --fixture one.json run --wait -- sh -c 'touch out/bob; sleep 0.5' 2>/dev/null &
	wait_for in_line 1
	as_user visdev-alice "$VISDEV" --fixture one.json run --wait -- sh -c 'test -e out/bob && touch out/alice-after-bob' 2>/dev/null &
	wait_for in_line 2
	# a forged record: bob claims an early place in alice's name (locked before it is
	# written: a record nobody holds is stale, and the waiters tidy it away)
	printf '{"ticket": 3, "user": "visdev-alice", "pid": 1, "since": 0, "n": 1, "mem_mib": 0, "min_free_mib": 0, "max_util": -1, "policy": "most-free", "model": null, "within": null, "command": "x"}\n' >forged
	chmod 644 forged
	as_user visdev-bob flock "$VISDEV_LEASE_DIR/wait.3.json" sh -c 'cat forged >"$VISDEV_LEASE_DIR/wait.3.json"; exec sleep 60' &
	wait_for test -s "$VISDEV_LEASE_DIR/wait.3.json"
	run "$VISDEV" --fixture one.json leases --json
	[ "$(jq -c '[.line[] | .user]' <<<"$output")" = '["visdev-bob","visdev-alice"]' ]
	[[ "$(jq -r '.line_ignored[0]' <<<"$output")" == *"wait.3.json (visdev-bob): it claims a place older than its file"* ]]
	kill "$(jq -r '.leases[0].pid' < <("$VISDEV" --fixture one.json leases --json))"
	wait_for test -e out/alice-after-bob
	pkill -KILL -u visdev-bob 2>/dev/null || true
}

# Every line of a table within 100 columns, each row's column $2 starting
# where the header's word $2 does (the header being the line that starts with $1).
table_fits() {
	awk -v head="$1" -v word="$2" '
		length($0) > 100 { print "too wide (" length($0) "): " $0; bad = 1 }
		index($0, head) == 1 { col = index($0, word); rows = 0; next }
		col && /^$/ { col = 0 }
		col {
			rows++
			if (substr($0, col - 2, 2) != "  " || substr($0, col, 1) == " ") { print "misaligned: " $0; bad = 1 }
		}
		END { exit bad }'
}

@test "leases and the line on a MIG machine: within 100 columns, MIG devices by gi and ci, long commands cut" {
	FIX=layout
	long="sleep 60 # $(printf 'and on %.0s' $(seq 20))"
	v run -n 21 -- sh -c "$long" >/dev/null 2>&1 &
	wait_for leased 21
	vx run -n 2 --model 'NVIDIA H200*' --mem 30G --min-free 10G --max-util 50 --wait -- true 2>err &
	BG=$!
	wait_for in_line 1
	run v leases
	assert_status 0
	table_fits DEVICE SINCE <<<"$output"
	table_fits PLACE SINCE <<<"$output"
	[[ "${lines[1]}" == "GPU 0 gi 7 ci 0  "*"  quiet "*"  sh -c sleep 60 # a"*".." ]]
	assert_output_has "  -n 2 --mem 30G -.."
	# the reasons: the same lease on 21 devices is one line
	[ "$(grep -c 'leased by' err)" -eq 1 ]
	grep -q '^  GPU 0 gi 7 ci 0, GPU 0 gi 9 ci 1, GPU 0 gi 11 ci 0 and 18 more: leased by' err
	kill -- -"$(v leases --json | jq -r '.leases[0].pgid')"
	wait "$BG"
	grep -q 'got GPU [0-9]\( gi [0-9]* ci [0-9]*\)\?, GPU [0-9]' err
}
