#!/usr/bin/env bats
# visdev run and leases: leased GPUs, exit statuses, signals, waiting, sharing.

load helper

# visdev on a 4-GPU and a 1-GPU server. They exec, so that `one run ... &` makes $!
# visdev itself; use them only in a subshell: `run`, `$(...)`, a pipe or `&`.
four() { exec "$VISDEV" --fixture "$FIXTURES/four.json" "$@"; }
one() { exec "$VISDEV" --fixture "$FIXTURES/one.json" "$@"; }

# Waits (up to 10 s) until the lease directory shows N leases, each naming its
# job and no longer visdev, which holds a lease for the moments before the job starts.
wait_leases() {
	for _ in $(seq 100); do
		leases_name_jobs "$1" && return 0
		sleep 0.1
	done
	four leases >&2
	return 1
}

leases_name_jobs() {
	local pids pid
	pids=$(four leases --json | jq -r '.leases[].pid') || return 1
	[ "$(wc -w <<<"$pids")" -eq "$1" ] || return 1
	for pid in $pids; do
		[ "$(ps -o comm= -p "$pid")" != visdev ] || return 1
	done
}

@test "run sets the variables for the command and returns its status" {
	run four run -- sh -c 'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"; exit 7'
	assert_status 7
	[ "$output" = "0 PCI_BUS_ID" ]
}

@test "VISDEV_LEASE is one JSON object: the job's lease as visdev leases shows it" {
	run four run -n 2 -- sh -c 'printf "%s" "$VISDEV_LEASE" > lease.json; echo $$ > job.pid; \
		"$0" --fixture "$1" --json leases > leases.json' "$VISDEV" "$FIXTURES/four.json"
	assert_status 0
	[ "$(jq -c 'keys' lease.json)" = \
		'["command","devices","lease_dir","mem_mib","mode","pgid","pid","queue","since","uid","user"]' ]
	[ "$(jq -c .queue lease.json)" = null ]
	[ "$(jq .pid lease.json)" = "$(cat job.pid)" ]
	[ "$(jq .pgid lease.json)" = "$(cat job.pid)" ]
	[ "$(jq -r .lease_dir lease.json)" = "$VISDEV_LEASE_DIR" ]
	[ "$(jq -c '[.devices[] | {index, uuid}]' lease.json)" = \
		"$(jq -c '[.leases[] | {index, uuid}]' leases.json)" ]
	# leases adds what the audit says of the lease
	[ "$(jq -c '.leases[0] | del(.index, .uuid, .audit)' leases.json)" = \
		"$(jq -c 'del(.devices, .lease_dir)' lease.json)" ]
	[[ "$(jq -r .since lease.json)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{2}:[0-9]{2}$ ]]
	run four run --mem 3G -- sh -c 'printf "%s" "$VISDEV_LEASE" | jq -c "[.mode, .mem_mib]"'
	[ "$output" = '["shared",3072]' ]
}

@test "run's status: 127 not found, 126 not executable, 128+N for a signal" {
	run -127 four run -- no-such-command-here
	assert_output_has "command not found"
	touch script && chmod -x script
	run four run -- ./script
	assert_status 126
	run four run -- sh -c 'kill -TERM $$'
	assert_status 143
}

# How a parent sees a child end: "signal N", or "exit N" (perl reports it as the kernel does).
how_it_ended() {
	perl -e 'system(@ARGV); print $? & 127 ? "signal " . ($? & 127) : "exit " . ($? >> 8)' "$@"
}

@test "a job that dies of SIGINT or SIGQUIT takes visdev with it, so the calling loop stops" {
	ulimit -c 0
	for sig in INT QUIT; do
		run how_it_ended "$VISDEV" --fixture "$FIXTURES/one.json" run -- \
			perl -e "\$SIG{$sig} = 'DEFAULT'; kill '$sig', \$\$; sleep 5"
		[ "$output" = "signal $(kill -l "$sig")" ] || { echo "$sig: $output"; return 1; }
	done
	# with the lease let go first, and no core of visdev's
	[ "$(one leases --json | jq '.leases | length')" -eq 0 ]
	[ -z "$(find . -name 'core*')" ]
	# a job that handles SIGINT and exits is only exiting; other signals are 128+N, as before
	run how_it_ended "$VISDEV" --fixture "$FIXTURES/one.json" run -- sh -c 'exit 130'
	[ "$output" = "exit 130" ]
	run how_it_ended "$VISDEV" --fixture "$FIXTURES/one.json" run -- perl -e 'kill "TERM", $$'
	[ "$output" = "exit 143" ]
}

@test "while a job runs its GPU is leased: others get another, then none" {
	one run -- sleep 30 &
	wait_leases 1
	run one run -- true
	assert_status 3
	assert_output_has "GPU 0: leased by $(id -un) (pid"
	assert_output_has "sleep 30"
	assert_output_has "--wait"
	kill %1
	wait
}

@test "leases and list show who holds what" {
	four run -n 2 -- sleep 30 &
	wait_leases 2
	run four leases --json
	assert_status 0
	[ "$(jq -r '.leases[0].user' <<<"$output")" = "$(id -un)" ]
	[ "$(jq -r '.leases[0].command' <<<"$output")" = "sleep 30" ]
	[ "$(jq -r '.leases[0].mode' <<<"$output")" = exclusive ]
	pid=$(jq -r '.leases[0].pid' <<<"$output")
	[ "$(ps -o comm= -p "$pid")" = sleep ]
	run four list --json
	[ "$(jq '[.gpus[].leases | length] | add' <<<"$output")" -eq 2 ]
	run four list
	assert_output_has "leased by $(id -un) (pid $pid, sleep 30)"
	run four leases
	assert_output_has "sleep 30"
	kill %1
	wait
}

@test "a lease outlives kill -9 of visdev and ends with the job" {
	one run -- sleep 60 &
	visdev_pid=$!
	wait_leases 1
	job=$(four leases --json | jq -r '.leases[0].pid')
	kill -9 "$visdev_pid"
	wait "$visdev_pid" || true
	run one run -- true
	assert_status 3
	[ "$(one leases --json | jq '.leases | length')" -eq 1 ]
	kill "$job"
	wait_for gone "$job"
	# the keeper sees the end (at once for the job's leader), and lets go
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 0 ]'
	run one run -- true
	assert_status 0
}

@test "a child that Python's subprocess started keeps the lease after kill -9 of visdev, until it ends" {
	# subprocess closes every inherited descriptor; the job exits once the child runs
	cat >job.py <<'PY'
import os, subprocess, time
subprocess.Popen(["sh", "-c", "echo $$ > child.pid; while [ ! -e stop ]; do sleep 0.05; done"])
while not os.path.exists("go"):
    time.sleep(0.05)
PY
	one run -- python3 job.py &
	visdev_pid=$!
	wait_for test -s child.pid
	job=$(one leases --json | jq -r '.leases[0].pid')
	kill -9 "$visdev_pid"
	wait "$visdev_pid" || true
	touch go # the job exits; its child lives on, holding none of the lease's descriptors
	wait_for gone "$job"
	child=$(cat child.pid)
	! gone "$child"
	run one run -- true
	assert_status 3
	[ "$(one leases --json | jq -r '.leases[0].pid')" = "$job" ]
	touch stop
	wait_for gone "$child"
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 0 ]'
	run one run -- true
	assert_status 0
}

@test "a process that leaves the job's group with setsid is not followed: the lease ends with the group" {
	run one run -- python3 -c 'import subprocess; subprocess.Popen(["setsid", "sh", "-c", "echo $$ > child.pid; exec sleep 30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)'
	assert_status 0
	wait_for test -s child.pid
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 0 ]'
	! gone "$(cat child.pid)"
	kill "$(cat child.pid)"
}

@test "SIGTERM to visdev reaches the job's whole process group" {
	one run -- sh -c 'trap "echo term > got; exit 3" TERM; sleep 100 & echo $! > bg; wait' &
	visdev_pid=$!
	wait_leases 1
	wait_for test -s bg
	kill -TERM "$visdev_pid"
	status=0
	wait "$visdev_pid" || status=$?
	[ "$status" -eq 3 ]
	[ "$(cat got)" = term ]
	# the background sleep, in the same group, got it too: it is gone well
	# before its 100 s
	wait_for gone "$(cat bg)"
}

@test "SIGTERM to visdev ends a job that was stopped, as a shell's kill does" {
	one run -- sleep 100 &
	visdev_pid=$!
	wait_leases 1
	job=$(one leases --json | jq -r '.leases[0].pid')
	kill -STOP "$job"
	wait_for eval '[ "$(awk "{print \$3}" /proc/$job/stat)" = T ]'
	kill -TERM "$visdev_pid"
	# a stopped job keeps the signal pending until it is continued
	wait_for gone "$visdev_pid" || { kill -CONT "$job"; return 1; }
	status=0
	wait "$visdev_pid" || status=$?
	[ "$status" -eq 143 ]
}

@test "run --wait waits for a lease to end, says what it waits for, then runs" {
	one run -- sleep 100 &
	wait_leases 1
	job=$(one leases --json | jq -r '.leases[0].pid')
	one run --wait -- sh -c 'echo ran' >out 2>err &
	waiter=$!
	wait_for grep -q "GPU 0: leased by" err
	grep -q "waiting" err
	kill -0 "$waiter"
	kill "$job"
	wait "$waiter"
	[ "$(cat out)" = ran ]
}

@test "run --wait=SECONDS gives up with exit 3" {
	one run -- sleep 30 &
	wait_leases 1
	run one run --wait=0.3 -- true
	assert_status 3
	assert_output_has "waited long enough"
	kill %1
	wait
}

@test "24 runs started at once on 4 GPUs never share a GPU" {
	mkdir held
	for i in $(seq 24); do
		four run --wait -- sh -c 'mkdir held/$CUDA_VISIBLE_DEVICES 2>/dev/null || echo OVERLAP >> overlaps
			sleep 0.1; rmdir held/$CUDA_VISIBLE_DEVICES; echo $CUDA_VISIBLE_DEVICES >> ran' &
	done
	wait
	[ ! -e overlaps ]
	[ "$(wc -l < ran)" -eq 24 ]
	[ "$(sort -u ran | wc -l)" -eq 4 ]
}

@test "--mem packs jobs on one GPU, counting the memory each declared" {
	one run --mem 30G -- sleep 30 &
	wait_leases 1
	one run --mem 30G -- sleep 30 &
	wait_leases 2
	run one leases --json
	[ "$(jq -c '[.leases[].mode] | unique' <<<"$output")" = '["shared"]' ]
	[ "$(jq -c '[.leases[].mem_mib] | unique' <<<"$output")" = '[30720]' ]
	# 79.6 GiB free, 60 GiB promised: 30 GiB more does not fit, 19 GiB does
	run one run --mem 30G -- true
	assert_status 3
	assert_output_has "reserved by leases"
	run one run --mem 19G -- true
	assert_status 0
	# and no exclusive lease while shares live
	run one run -- true
	assert_status 3
	kill %1 %2
	wait
}

@test "an exclusive lease keeps shared jobs out" {
	one run -- sleep 30 &
	wait_leases 1
	run one run --mem 1G -- true
	assert_status 3
	kill %1
	wait
}

@test "--or-cpu runs the command on the CPU when nothing fits" {
	one run -- sleep 30 &
	wait_leases 1
	run one run --or-cpu -- sh -c 'echo "[$CUDA_VISIBLE_DEVICES]"'
	assert_status 0
	assert_output_has "[]"
	assert_output_has "running on the CPU"
	kill %1
	wait
}

@test "a lock file that is a symbolic link is refused: that GPU is passed over, by name" {
	mkdir -p "$VISDEV_LEASE_DIR"
	ln -s /etc/passwd "$VISDEV_LEASE_DIR/GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b.lock"
	run one run -- true
	assert_status 3
	assert_output_has "GPU 0: lock file '$VISDEV_LEASE_DIR/GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b.lock' is a symbolic link: refusing it"
}

@test "a world-writable lease directory without the sticky bit is refused" {
	mkdir -p "$VISDEV_LEASE_DIR"
	chmod 0777 "$VISDEV_LEASE_DIR"
	run one run -- true
	assert_status 1
	assert_output_has "without the sticky bit"
	assert_output_has "chmod +t"
	chmod 1777 "$VISDEV_LEASE_DIR"
	run one run -- true
	assert_status 0
}

@test "a lease directory that is a symbolic link is refused" {
	mkdir real
	ln -s "$PWD/real" "$VISDEV_LEASE_DIR"
	run one run -- true
	assert_status 1
	assert_output_has "symbolic link"
}

@test "run's usage errors" {
	run one run
	assert_status 2
	assert_output_has "run needs a command"
	run one run --wait=soon -- true
	assert_status 2
	# --json is refused, not ignored: the job does not start
	run one run --json -- touch started
	assert_status 2
	assert_output_has "run has no output of its own for --json"
	[ ! -e started ]
	run one run --mem 0G -- true
	assert_status 2
	assert_output_has "must be more than 0"
	# a bare size is refused with the forms to write; a unit written apart is not a command
	run one run --min-free 40 -- true
	assert_status 2
	assert_output_has "invalid size '40': a size needs its unit, such as 40G, 40GiB, 40960M or 40M"
	run one run --min-free 40 GB python train.py
	assert_status 2
	assert_output_has "--min-free 40 GB: the unit goes with the number: write --min-free 40GB"
	[[ "$output" != *"command not found"* ]]
	run one run --help
	assert_status 0
	assert_output_has "usage: visdev run"
}

@test "a signal ignored when visdev starts (nohup) stays ignored, for the job too" {
	(trap '' HUP; exec "$VISDEV" --fixture "$FIXTURES/one.json" run -- \
		sh -c 'for i in $(seq 200); do [ -e go ] && break; sleep 0.05; done; echo survived > out') &
	visdev_pid=$!
	wait_leases 1
	kill -HUP "$visdev_pid"
	touch go
	status=0
	wait "$visdev_pid" || status=$?
	[ "$status" -eq 0 ]
	[ "$(cat out)" = survived ]
}

@test "SIGINT and SIGHUP reach the job's process group too" {
	for sig in INT HUP; do
		rm -f got
		env --default-signal=INT,HUP "$VISDEV" --fixture "$FIXTURES/one.json" run -- \
			sh -c "trap 'echo $sig > got; exit 5' $sig; touch started; sleep 20" &
		visdev_pid=$!
		wait_for test -e started
		rm started
		kill -"$sig" "$visdev_pid"
		status=0
		wait "$visdev_pid" || status=$?
		[ "$status" -eq 5 ] || { echo "$sig: exit $status"; return 1; }
		[ "$(cat got)" = "$sig" ]
	done
}

@test "asked to stop while leasing, run does not start the job" {
	mkdir -p "$VISDEV_LEASE_DIR"
	chmod 1777 "$VISDEV_LEASE_DIR"
	# someone holds the allocation lock: run blocks on it
	flock "$VISDEV_LEASE_DIR/.alloc.lock" sleep 3 &
	holder=$!
	wait_for eval '! flock -n "$VISDEV_LEASE_DIR/.alloc.lock" true'
	env --default-signal=TERM "$VISDEV" --fixture "$FIXTURES/one.json" run -- touch started &
	visdev_pid=$!
	sleep 0.3
	kill -TERM "$visdev_pid"
	status=0
	wait "$visdev_pid" || status=$?
	[ "$status" -eq 143 ]
	[ ! -e started ]
	wait "$holder"
}

@test "a --wait interrupted by SIGINT dies of it (130 to a shell) and starts nothing" {
	one run -- sleep 30 &
	wait_leases 1
	env --default-signal=INT "$VISDEV" --fixture "$FIXTURES/one.json" run --wait -- touch started 2>err &
	waiter=$!
	for _ in $(seq 100); do grep -q waiting err && break; sleep 0.1; done
	kill -INT "$waiter"
	status=0
	wait "$waiter" || status=$?
	[ "$status" -eq 130 ]
	[ ! -e started ]
	# and it dies of the SIGINT, so that a calling loop stops
	run perl -e '
		my $p = fork() // die;
		if (!$p) { open(STDERR, ">", "err2"); $SIG{INT} = "DEFAULT"; exec(@ARGV); }
		for (1 .. 100) { last if -s "err2"; select(undef, undef, undef, 0.1); }
		kill("INT", $p);
		waitpid($p, 0);
		print $? & 127 ? "signal " . ($? & 127) : "exit " . ($? >> 8);
	' "$VISDEV" --fixture "$FIXTURES/one.json" run --wait -- touch started
	grep -q waiting err2
	[ "$output" = "signal 2" ]
	[ ! -e started ]
	kill %1
	wait
}

@test "'--wait 5 -- cmd' is a usage error, not a command named 5" {
	run one run --wait 5 -- true
	assert_status 2
	assert_output_has "--wait=5"
}

@test "under a parent's restriction, run gives the job the chosen GPU by UUID" {
	CUDA_VISIBLE_DEVICES=2,3 CUDA_DEVICE_ORDER=PCI_BUS_ID run four run -- sh -c 'echo $CUDA_VISIBLE_DEVICES'
	assert_status 0
	[[ "$output" == GPU-2a1b2c3d-* || "$output" == GPU-3a1b2c3d-* ]]
}

@test "a command longer than a record keeps is cut, and the lease still counts" {
	long=$(head -c 20000 /dev/zero | tr '\0' a)
	one run --mem 60G -- sh -c "sleep 30 # $long" &
	wait_leases 1
	[ "$(one leases --json | jq -r '.leases[0].command | length')" -eq 255 ]
	run one run --mem 60G -- true
	assert_status 3
	kill %1
	wait
}

@test "a relative lease directory is refused" {
	VISDEV_LEASE_DIR=relative run one run -- true
	assert_status 1
	assert_output_has "not an absolute path"
	[ ! -e relative ]
}

@test "a FIFO planted in the lease directory does not hang anyone" {
	mkdir -p "$VISDEV_LEASE_DIR"
	chmod 1777 "$VISDEV_LEASE_DIR"
	mkfifo "$VISDEV_LEASE_DIR/lease.1.0.json"
	run timeout 10 "$VISDEV" --fixture "$FIXTURES/one.json" leases
	assert_status 0
	run timeout 10 "$VISDEV" --fixture "$FIXTURES/one.json" run -- true
	assert_status 0
}

@test "leases with none held, its help and its usage errors" {
	run one leases
	assert_status 0
	assert_output_has "no leases in $VISDEV_LEASE_DIR"
	run one leases --json
	assert_status 0
	[ "$(jq '.leases | length' <<<"$output")" -eq 0 ]
	run one leases --help
	assert_status 0
	assert_output_has "usage: visdev leases"
	run one leases extra
	assert_status 2
	assert_output_has "leases takes no arguments"
}

@test "a command with arguments that are not UTF-8 runs, and is recorded readably" {
	one run -- sh -c 'sleep 30' $'caf\xe9' &
	wait_leases 1
	[ "$(one leases --json | jq -r '.leases[0].command')" = "sh -c sleep 30 caf?" ]
	kill %1
	wait
	e=$(printf '\303\251%.0s' $(seq 200))
	run one run -- echo "x$e"
	assert_status 0
}

@test "--wait does not wait for what can never fit here" {
	run timeout 20 "$VISDEV" --fixture "$FIXTURES/one.json" run -n 2 --wait -- true
	assert_status 3
	assert_output_has "never will on this machine"
	run timeout 20 "$VISDEV" --fixture "$FIXTURES/one.json" run --min-free 100G --wait -- true
	assert_status 3
	assert_output_has "never will"
}

@test "a script without #! runs through /bin/sh, as from a shell; a directory is refused" {
	printf 'echo "no shebang: $1"\n' > plain.sh
	chmod +x plain.sh
	run one run -- ./plain.sh arg1
	assert_status 0
	[ "$output" = "no shebang: arg1" ]
	mkdir adir
	run one run -- ./adir
	assert_status 126
	assert_output_has "Is a directory"
}

@test "an empty element of PATH is the current folder, as for the shell" {
	printf '#!/bin/sh\necho found\n' > here-cmd
	chmod +x here-cmd
	PATH=":$PATH" run one run -- here-cmd
	assert_status 0
	[ "$output" = found ]
}

@test "a bad --mem says what is wrong with it" {
	run one run --mem 8X -- true
	assert_status 2
	assert_output_has "invalid size '8X'"
}

@test "the job starts only once its lease record names it" {
	# a race, not a certainty: each of the forty starts is a chance to lose it
	for _ in $(seq 40); do
		run one run -- sh -c '"$0" --fixture "$1" --json leases |
			jq -e ".leases[0] | .pid == $$ and .pgid == $$"' "$VISDEV" "$FIXTURES/one.json"
		assert_status 0
	done
}

@test "visdev inside a job that visdev run started says the job holds the GPUs, never waits for them" {
	run one run -- "$VISDEV" --fixture "$FIXTURES/one.json" pick
	assert_status 3
	assert_output_has "holds 1 of these devices itself"
	run timeout 20 "$VISDEV" --fixture "$FIXTURES/one.json" run -- \
		"$VISDEV" --fixture "$FIXTURES/one.json" run --wait -- true
	assert_status 3
	assert_output_has "would never end"
}

@test "under umask 077 a lease record is still readable by every user" {
	(umask 077; exec "$VISDEV" --fixture "$FIXTURES/one.json" run --mem 10G -- sleep 30) &
	wait_leases 1
	for f in "$VISDEV_LEASE_DIR"/lease.*.json "$VISDEV_LEASE_DIR"/GPU-*.lock; do
		[ "$(stat -c %a "$f")" = 644 ] || { ls -l "$VISDEV_LEASE_DIR"; return 1; }
	done
	kill %1
	wait
}

@test "an ignored SIGCHLD does not lose the job's exit status" {
	run env --ignore-signal=CHLD "$VISDEV" --fixture "$FIXTURES/one.json" run -- sh -c 'exit 7'
	assert_status 7
}

@test "waiting on a lock held without a record does not spin" {
	mkdir -p "$VISDEV_LEASE_DIR"
	chmod 1777 "$VISDEV_LEASE_DIR"
	flock -x "$VISDEV_LEASE_DIR/GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b.lock" sleep 5 &
	wait_for eval '! flock -n "$VISDEV_LEASE_DIR/GPU-9f8e7d6c-5b4a-4938-8271-605f4e3d2c1b.lock" true'
	# 2 s of waiting should cost milliseconds of CPU, not seconds
	TIMEFORMAT='%U %S'
	cpu=$( { time "$VISDEV" --fixture "$FIXTURES/one.json" run --wait=2 -- true 2>/dev/null; } 2>&1 | tail -n 1)
	awk -v u="${cpu% *}" -v s="${cpu#* }" 'BEGIN { exit !(u + s < 0.5) }' ||
		{ echo "CPU seconds used while waiting: $cpu"; return 1; }
	kill %1 2>/dev/null || true
	wait
}

@test "with every GPU locked by another program, --wait=SECONDS ends in time without spinning" {
	mkdir -p "$VISDEV_LEASE_DIR"
	chmod 1777 "$VISDEV_LEASE_DIR"
	uuids=$(jq -r '.gpus[].uuid' "$FIXTURES/eight.json")
	for u in $uuids; do
		flock -x "$VISDEV_LEASE_DIR/$u.lock" sleep 10 &
	done
	for u in $uuids; do
		wait_for eval "! flock -n '$VISDEV_LEASE_DIR/$u.lock' true"
	done
	TIMEFORMAT='%R %U %S'
	times=$( { time { "$VISDEV" --fixture "$FIXTURES/eight.json" run --wait=1 -- true 2>err
		echo $? >rc; }; } 2>&1)
	[ "$(cat rc)" -eq 3 ] || { cat err; return 1; }
	grep -q "waited long enough" err
	grep -q "holder unknown" err
	# the locks stay 10 s: a wait of 1 s that ends within 5, having used little CPU
	read -r real user sys <<<"$times"
	awk -v r="$real" -v u="$user" -v s="$sys" 'BEGIN { exit !(r < 5 && u + s < 0.5) }' ||
		{ echo "wall, user, system seconds: $times"; return 1; }
	kill $(jobs -p) 2>/dev/null || true
	wait
}

@test "children that closed their descriptors keep the lease after the command exits" {
	# the command leaves a child that holds none of the lease's descriptors
	out=$("$VISDEV" --fixture "$FIXTURES/one.json" run -- \
		sh -c 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; sleep 4 >/dev/null 2>&1 & echo started')
	# visdev returned (its output closed) while the child still runs, and the lease lives on
	[ "$out" = started ]
	[ "$(one leases --json | jq '.leases | length')" -eq 1 ]
	run one run -- true
	assert_status 3
	# and it ends with the last process of the job
	wait_for eval '[ "$(one leases --json | jq ".leases | length")" -eq 0 ]'
	run one run -- true
	assert_status 0
}

@test "two --mem jobs share one GPU, leaving the others whole for whole-GPU jobs" {
	four run --mem 10G -- sleep 30 &
	wait_leases 1
	run four run --mem 10G -- sh -c 'printf "%s" "$VISDEV_LEASE" | jq -c "[.devices[].index]"'
	assert_status 0
	[ "$(four leases --json | jq -c '[.leases[].index]')" = "[0]" ]
	[ "$output" = "[0]" ]
	run four run -n 3 -- sh -c 'printf "%s" "$VISDEV_LEASE" | jq -c "[.devices[].index] | sort"'
	assert_status 0
	[ "$output" = "[1,2,3]" ]
	kill %1
	wait
}
