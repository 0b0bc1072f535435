#!/usr/bin/env bats
# visdev run on a real terminal (tmux): the job gets the terminal, Ctrl-Z stops
# the job and visdev together as one shell job, fg resumes both, Ctrl-C ends it.

load helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	export VISDEV_LEASE_DIR=$BATS_TEST_TMPDIR/leases
	SESSION=visdev-test-$$-$BATS_TEST_NUMBER
	tmux -L "$SESSION" -f /dev/null new-session -d -s main -x 150 -y 40 \
		"env -i PATH=$PATH HOME=$BATS_TEST_TMPDIR TERM=xterm PS1='$ ' bash --norc --noprofile -i"
}

teardown() {
	tmux -L "$SESSION" kill-server 2>/dev/null || true
}

type_line() {
	tmux -L "$SESSION" send-keys -t main "$1" Enter
}

# The state letter (R, S, T, ...) of the job's process, by the lease record,
# once that process is the job (sleep), not the visdev it was forked from.
job_state() {
	local pid
	pid=$("$VISDEV" --fixture "$FIXTURES/one.json" leases --json | jq -r '.leases[0].pid // empty')
	[ -n "$pid" ] && awk '$2 == "(sleep)" {print $3}' "/proc/$pid/stat"
}

@test "Ctrl-Z stops the job with visdev, fg resumes it, Ctrl-C ends it with 130" {
	type_line "export VISDEV_LEASE_DIR=$VISDEV_LEASE_DIR"
	type_line "$VISDEV --fixture $FIXTURES/one.json run -- sleep 100"
	wait_for eval '[ "$(job_state)" = S ]'
	tmux -L "$SESSION" send-keys -t main C-z
	wait_for eval '[ "$(job_state)" = T ]'
	type_line "jobs > $PWD/jobs"
	wait_for grep -q Stopped jobs
	type_line "fg"
	wait_for eval '[ "$(job_state)" = S ]'
	tmux -L "$SESSION" send-keys -t main C-c
	type_line "echo rc=\$? > $PWD/rc"
	wait_for test -s rc
	[ "$(cat rc)" = rc=130 ]
	[ "$("$VISDEV" --fixture "$FIXTURES/one.json" leases --json | jq '.leases | length')" -eq 0 ]
}

@test "one Ctrl-C stops a shell loop of visdev runs, as it would without visdev" {
	type_line "export VISDEV_LEASE_DIR=$VISDEV_LEASE_DIR"
	type_line "for i in 1 2 3; do $VISDEV --fixture $FIXTURES/one.json run -- sleep 100; echo \$i >> $PWD/went-on; done; echo done > $PWD/loop"
	wait_for eval '[ "$(job_state)" = S ]'
	tmux -L "$SESSION" send-keys -t main C-c
	type_line "echo rc=\$? > $PWD/rc"
	wait_for test -s rc
	# bash abandons the whole loop: nothing after the first run ran
	[ ! -e went-on ] && [ ! -e loop ]
	[ "$(cat rc)" = rc=130 ]
}

# What the terminal shows now.
screen() {
	tmux -L "$SESSION" capture-pane -p -t main
}

@test "on a terminal, run --wait keeps one status line of its place in line, then says what it got" {
	"$VISDEV" --fixture "$FIXTURES/one.json" run -q -- sleep 100 &
	holder=$!
	wait_for eval '[ "$("$VISDEV" --fixture "$FIXTURES/one.json" leases --json | jq ".leases | length")" -eq 1 ]'
	type_line "export VISDEV_LEASE_DIR=$VISDEV_LEASE_DIR"
	type_line "$VISDEV --fixture $FIXTURES/one.json run --wait -- true"
	wait_for eval 'screen | grep -q "visdev: waiting: place 1 of 1 in line, for 1 GPU, [0-9]* s"'
	# one line, kept up to date in place: the count goes up, the lines do not
	lines=$(screen | grep -c "in line, for 1 GPU")
	wait_for eval 'screen | grep -q "in line, for 1 GPU, [1-9][0-9]* s"'
	[ "$(screen | grep -c "in line, for 1 GPU")" -eq "$lines" ]
	kill "$("$VISDEV" --fixture "$FIXTURES/one.json" leases --json | jq -r '.leases[0].pid')"
	wait_for eval 'screen | grep -q "visdev: got GPU 0 after [0-9.]* s in line"'
	wait "$holder" || true
}

@test "queue on a terminal: one progress line (counts, which GPU runs which job), output above it, Ctrl-C" {
	printf 'echo first\nwhile [ ! -e go ]; do sleep 0.02; done\nsleep 60\n' >jobs.txt
	type_line "cd $PWD && export VISDEV_LEASE_DIR=$VISDEV_LEASE_DIR"
	type_line "$VISDEV --fixture $FIXTURES/four.json queue jobs.txt; echo EXIT=\$?"
	screen() { tmux -L "$SESSION" capture-pane -p -t main; }
	wait_for eval 'screen | grep -Eq "^queue: 1 done, 0 failed, 2 running, 0 waiting(, ETA [^;]+)?; GPU [0-3] #[12], GPU [0-3] #[12]$"'
	# the job's line above the progress line, whole
	screen | grep -qx '\[0\] first'
	[ "$(screen | grep -c '^queue: ')" -eq 1 ]
	tmux -L "$SESSION" send-keys -t main C-c
	wait_for eval 'screen | grep -q "EXIT=130"'
	screen | grep -q "stopping: 2 jobs sent SIGTERM"
}
