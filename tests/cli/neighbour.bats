#!/usr/bin/env bats
# Leases against a careless or hostile neighbour: two real Unix users share one
# lease directory, and one of them plants, holds, forges or removes what is in it.

load helper

one() { exec "$VISDEV" --fixture "$FIXTURES/one.json" "$@"; }

G0=GPU-3c1a7e90-4b1e-4c7a-9d2f-6e8a1b3c5d70 # eight.json's GPU 0

@test "a FIFO planted by another user as a lock file hangs nobody" {
	two_users
	(as_user visdev-bob mkfifo "$VISDEV_LEASE_DIR/$G0.lock")
	# the GPU with a FIFO for a lock file is passed over, by name
	run as_user visdev-alice timeout 10 "$VISDEV" --fixture eight.json run -n 8 --wait=2 -- true
	[ "$status" -eq 3 ] # not 124: timeout never fired
	assert_output_has "$G0.lock' is not a regular file: refusing it; 'visdev-bob' or an administrator should remove it"
	run as_user visdev-alice timeout 10 "$VISDEV" --fixture eight.json run --exclude 1,2,3,4,5,6,7 -- true
	assert_status 3
	run as_user visdev-alice timeout 10 "$VISDEV" --fixture eight.json run -- true
	assert_status 0
	# the allocation lock as a FIFO: refused at once, by name
	rm "$VISDEV_LEASE_DIR/.alloc.lock"
	(as_user visdev-bob mkfifo "$VISDEV_LEASE_DIR/.alloc.lock")
	run as_user visdev-alice timeout 10 "$VISDEV" --fixture eight.json run --wait=2 -- true
	assert_status 1
	assert_output_has ".alloc.lock' is not a regular file: refusing it"
}

@test "the allocation lock held by another user: --wait's deadline holds, a signal ends the wait, the holder is named" {
	two_users
	as_user visdev-bob flock "$VISDEV_LEASE_DIR/.alloc.lock" sleep 30 &
	wait_for eval '! flock -n "$VISDEV_LEASE_DIR/.alloc.lock" true'
	SECONDS=0
	run as_user visdev-alice timeout 20 "$VISDEV" --fixture eight.json run --wait=1 -- true
	assert_status 3
	[ "$SECONDS" -le 4 ]
	assert_output_has "allocation lock"
	assert_output_has "(visdev-bob, flock)"
	# without --wait: a moment, then exit 3
	SECONDS=0
	run as_user visdev-alice timeout 20 "$VISDEV" --fixture eight.json run -- true
	assert_status 3
	[ "$SECONDS" -le 5 ]
	assert_output_has "to wait for it, use --wait"
	# waiting for ever, SIGINT ends it at once
	as_user visdev-alice env --default-signal=INT "$VISDEV" --fixture eight.json run --wait -- touch started 2>err &
	waiter=$!
	wait_for grep -q "allocation lock" err
	SECONDS=0
	kill -INT "$waiter"
	status=0
	wait "$waiter" || status=$?
	[ "$status" -eq 130 ]
	[ "$SECONDS" -le 2 ]
	[ ! -e started ]
}

@test "one bad lock file costs one GPU, not the machine" {
	two_users
	# another user's lock file that nobody else may open
	(as_user visdev-bob sh -c "umask 777; : > '$VISDEV_LEASE_DIR/$G0.lock'")
	run as_user visdev-alice "$VISDEV" --fixture eight.json run --exclude 1,2,3,4,5,6,7 -- true
	assert_status 3
	assert_output_has "$G0.lock': Permission denied; 'visdev-bob' or an administrator should make it readable by all (chmod 644 on it)"
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -- sh -c 'echo "[$CUDA_VISIBLE_DEVICES]"'
	assert_status 0
	[[ "$output" == "["[1-7]"]"* ]]
	# a directory and a symbolic link in its place: the same
	rm -f "$VISDEV_LEASE_DIR/$G0.lock"
	(as_user visdev-bob mkdir "$VISDEV_LEASE_DIR/$G0.lock")
	run as_user visdev-alice "$VISDEV" --fixture eight.json run --wait=1 -- true
	assert_status 0
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 8 -- true
	assert_status 3
	assert_output_has "$G0.lock' is a directory: 'visdev-bob' or an administrator should remove it"
	rmdir "$VISDEV_LEASE_DIR/$G0.lock"
	(as_user visdev-bob ln -s /etc/passwd "$VISDEV_LEASE_DIR/$G0.lock")
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 8 -- true
	assert_status 3
	assert_output_has "$G0.lock' is a symbolic link: refusing it"
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 7 -- true
	assert_status 0
}

@test "a forged record blocks no GPU, and the holder shown is the record file's owner" {
	two_users
	uuids=$(jq -c '[.gpus[].uuid]' eight.json)
	rec=$VISDEV_LEASE_DIR/lease.1.0.json
	(as_user visdev-bob sh -c "printf '%s\n' '{\"uuids\": $uuids, \"mode\": \"exclusive\", \"mem_mib\": 0, \"uid\": 0, \"user\": \"root\", \"pid\": 1, \"pgid\": 1, \"command\": \"init\", \"since\": 1}' > '$rec'")
	as_user visdev-bob flock "$rec" sleep 30 &
	wait_for eval '! flock -n "$rec" true'
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 8 -- true
	assert_status 0
	run as_user visdev-alice "$VISDEV" --fixture eight.json leases --json
	[ "$(jq '.leases | length' <<<"$output")" -eq 0 ]
	# once bob really holds GPU 0's lock, the record counts for GPU 0 alone, as bob's
	as_user visdev-bob flock "$VISDEV_LEASE_DIR/$G0.lock" sleep 30 &
	wait_for eval '! flock -n "$VISDEV_LEASE_DIR/$G0.lock" true'
	run as_user visdev-alice "$VISDEV" --fixture eight.json leases --json
	[ "$(jq -c '[.leases[] | [.uuid, .user]]' <<<"$output")" = "[[\"$G0\",\"visdev-bob\"]]" ]
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 7 -- true
	assert_status 0
}

@test "a lease directory that holds other files than visdev's is refused, so / never gets lock files" {
	VISDEV_LEASE_DIR=/ run one run -- true
	assert_status 1
	assert_output_has "lease directory '/' holds '"
	assert_output_has "which is not visdev's"
	[ ! -e /GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b.lock ] && [ ! -e /.alloc.lock ]
	mkdir -p "$VISDEV_LEASE_DIR"
	touch "$VISDEV_LEASE_DIR/notes.txt"
	run one leases
	assert_status 1
	assert_output_has "holds 'notes.txt'"
	rm "$VISDEV_LEASE_DIR/notes.txt"
	run one run -- true
	assert_status 0
}

@test "a lease directory that another ordinary user owns is reported once per command, with the fix" {
	two_users
	install -d -m 1777 "$SHARED/open"
	export VISDEV_LEASE_DIR=$SHARED/open/leases
	# alice is the first to use visdev here, so the directory is hers
	run as_user visdev-alice "$VISDEV" --fixture eight.json leases
	assert_status 0
	[ "$(stat -c %U "$VISDEV_LEASE_DIR")" = visdev-alice ]
	[[ "$output" != *warning* ]]
	for cmd in leases list "pick" "run -- true"; do
		run --separate-stderr as_user visdev-bob "$VISDEV" --fixture eight.json $cmd
		assert_status 0
		[ "$(grep -c "warning: the lease directory $VISDEV_LEASE_DIR belongs to the user visdev-alice" <<<"$stderr")" -eq 1 ]
		[[ "$stderr" == *"sudo chown root: $VISDEV_LEASE_DIR"* ]]
	done
	# and the warning is true: alice can remove bob's lease while his job runs
	as_user visdev-bob "$VISDEV" --fixture eight.json run -n 8 -- sleep 30 2>/dev/null &
	wait_for eval '[ "$("$VISDEV" --fixture eight.json leases --json | jq ".leases | length")" -eq 8 ]'
	(as_user visdev-alice sh -c 'rm -f "$VISDEV_LEASE_DIR"/* "$VISDEV_LEASE_DIR"/.alloc.lock')
	run as_user visdev-alice "$VISDEV" --fixture eight.json run -n 8 -- true
	assert_status 0
	# once root owns it, nobody is warned
	chown root: "$VISDEV_LEASE_DIR"
	run --separate-stderr as_user visdev-bob "$VISDEV" --fixture eight.json list
	[[ "$stderr" != *warning* ]]
}

@test "escape sequences in another user's command reach no terminal: leases, list and pick show them escaped" {
	two_users
	title=$'\e]0;owned\a'
	clear=$'\e[2J'
	as_user visdev-bob "$VISDEV" --fixture one.json run -- sh -c "sleep 30 # $title$clear" 2>/dev/null &
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 1 ]'
	for cmd in leases list pick; do
		run as_user visdev-alice "$VISDEV" --fixture one.json $cmd
		[[ "$output" != *$'\e'* && "$output" != *$'\a'* ]]
		# leases' table cuts the command to its column (its width depends on the other
		# columns): the escape is seen as far as it goes
		if [ $cmd = leases ]; then
			assert_output_has 'sh -c sleep 30 # \e'
		else
			assert_output_has '# \e]0;owned\a\e[2J'
		fi
	done
	# the JSON stays exact
	run one leases --json
	[ "$(jq -r '.leases[0].command' <<<"$output")" = "sh -c sleep 30 # $title$clear" ]
}

@test "names from a fixture are escaped in text output too" {
	jq '.gpus[0].name = "GPU\u001b[2J\u009b31m" | .gpus[0].processes = [{"pid": 7, "name": "x\u001b]0;t\u0007", "used_memory_mib": 1}]' \
		"$FIXTURES/one.json" >evil.json
	run "$VISDEV" --fixture evil.json list
	assert_status 0
	[[ "$output" != *$'\e'* && "$output" != *$'\a'* && "$output" != *$'\xc2\x9b'* ]]
	assert_output_has 'GPU\e[2J\xc2\x9b31m'
	assert_output_has 'x\e]0;t\a'
	run "$VISDEV" --fixture evil.json list --json
	[ "$(jq -r '.gpus[0].name' <<<"$output")" = $'GPU\e[2J\xc2\x9b31m' ]
}

@test "a lock file replaced between opening and locking is noticed and locked again" {
	G=$(jq -r '.gpus[0].uuid' "$FIXTURES/one.json")
	# the shim renames a new file over the lock file just before visdev locks it
	ASAN_OPTIONS=verify_asan_link_order=0 REPLACE_LOCK_NAME=$G.lock LD_PRELOAD=$SHIM_DIR/replace-lock.so one run -- sleep 30 &
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 1 ]'
	# what visdev holds is the lock file the directory has now, so nobody else gets the GPU
	! flock -n "$VISDEV_LEASE_DIR/$G.lock" true
	run one run -- true
	assert_status 3
	kill %1
	wait
	# replaced every time: that GPU is passed over, by name, rather than locked in vain
	ASAN_OPTIONS=verify_asan_link_order=0 REPLACE_LOCK_NAME=$G.lock REPLACE_LOCK_TIMES=99 LD_PRELOAD=$SHIM_DIR/replace-lock.so run one run -- true
	assert_status 3
	assert_output_has "$G.lock' was removed or replaced each time visdev locked it"
}

@test "a lease directory the user cannot write is named as the problem, with its fix" {
	two_users
	install -d -m 755 "$SHARED/closed"
	VISDEV_LEASE_DIR=$SHARED/closed run as_user visdev-alice "$VISDEV" --fixture eight.json run -- true
	assert_status 1
	assert_output_has "cannot create files in the lease directory '$SHARED/closed': Permission denied; it must be writable by every user of visdev (an administrator: 'chmod 1777 $SHARED/closed')"
	[[ "$output" != *".alloc.lock"* ]]
}
