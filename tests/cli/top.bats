#!/usr/bin/env bats
# visdev top in a real terminal (tmux): it draws every GPU, a lease and a
# waiter, answers keys, survives a resize and an NVML error, respects
# NO_COLOR, and quits on q; away from a terminal it says what to use.

load helper

setup() {
	cd "$BATS_TEST_TMPDIR" || return 1
	unset CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER VISDEV_FIXTURE
	export VISDEV_LEASE_DIR=$BATS_TEST_TMPDIR/leases XDG_STATE_HOME=$BATS_TEST_TMPDIR/state
	export VISDEV_NVML_LIB=$BATS_TEST_TMPDIR/no-such-libnvidia-ml.so.1
	SESSION=visdev-top-$$-$BATS_TEST_NUMBER
}

teardown() {
	tmux -L "$SESSION" kill-server 2>/dev/null || true
	# a queue first, which stops its jobs' whole groups; then each lease's job, group and all
	# (a job's process left behind would hold the test's output open until it ends)
	[ -z "${BG:-}" ] || { kill "$BG" 2>/dev/null; wait "$BG" 2>/dev/null; }
	for pid in $("$VISDEV" --fixture "$FIXTURES/four.json" leases --json 2>/dev/null | jq -r '.leases[].pid'); do
		kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null
	done
	return 0
}

# Starts `visdev ARGS... top $TOP_ARGS` in a terminal of $W x $H (default 120 x 40); its exit status goes to ./rc.
start_top() {
	tmux -L "$SESSION" -f /dev/null new-session -d -s main -x "${W:-120}" -y "${H:-40}" \
		"env PATH=$PATH TERM=xterm ${TOP_ENV:-} VISDEV_LEASE_DIR=$VISDEV_LEASE_DIR XDG_STATE_HOME=$XDG_STATE_HOME $VISDEV $* top ${TOP_ARGS:-}; echo \$? > $PWD/rc"
}

screen() { tmux -L "$SESSION" capture-pane -p -t main; }
# Whether the screen shows $1 (a fixed string).
shows() { screen | grep -qF -- "$1"; }
keys() { tmux -L "$SESSION" send-keys -t main "$@"; }

@test "top draws every GPU, a lease with its use and a waiter; keys sort, hide, help and quit" {
	"$VISDEV" --fixture "$FIXTURES/four.json" run -q -- sleep 60 &
	wait_for eval '[ "$("$VISDEV" --fixture "$FIXTURES/four.json" leases --json | jq -r ".leases[0].command")" = "sleep 60" ]'
	"$VISDEV" --fixture "$FIXTURES/four.json" run -n 4 --wait -q -- true &
	BG=$!
	start_top --fixture "$FIXTURES/four.json"
	wait_for shows "4 GPUs, 1 lease, 1 waiting"
	for i in 0 1 2 3; do
		shows "  $i NVIDIA A100-SXM4-80GB"
	done
	shows "LEASES"
	screen | grep -E '^ +GPU [0-3] +'"$(id -un)"' .* (active|quiet [0-9]+s) +sleep 60$'
	shows "LINE"
	screen | grep -E '^ +1 +'"$(id -un)"' .* 4 GPUs .* true$'
	# the first GPU is selected; j moves the selection down
	keys j
	keys s
	wait_for shows "sort memory"
	keys s s
	wait_for shows "sort index"
	keys '?'
	wait_for shows "visdev top: keys"
	keys '?'
	wait_for shows "LEASES"
	keys +
	wait_for shows "every 2s"
	keys q
	wait_for test -s rc
	[ "$(cat rc)" = 0 ]
}

@test "top shows a running queue and how far it is, from its journal" {
	printf 'true\nfalse\nsleep 60\n' >jobs.txt
	"$VISDEV" --fixture "$FIXTURES/four.json" queue -q --max-parallel 1 jobs.txt >/dev/null 2>&1 &
	BG=$!
	start_top --fixture "$FIXTURES/four.json"
	wait_for shows "QUEUES"
	wait_for eval 'screen | grep -E "^ +$(id -un) +\[[|]+ +\] 2/3 +1 +1 +0 .* $PWD/jobs.txt.journal$"'
	# the lease says which queue and job, in leases --json too
	[ "$("$VISDEV" --fixture "$FIXTURES/four.json" leases --json | jq -c '.leases[0].queue')" = "{\"journal\":\"$PWD/jobs.txt.journal\",\"job\":2}" ]
	keys q
	wait_for test -s rc
}

@test "top redraws on resize, within the new width" {
	start_top --fixture "$FIXTURES/eight.json"
	wait_for shows "  7 "
	tmux -L "$SESSION" resize-window -t main -x 80 -y 24
	wait_for eval '[ "$(screen | awk "length > 80" | wc -l)" -eq 0 ] && screen | grep -q "^GPU NAME"'
	[ "$(screen | awk 'NR == 1 && length($0) <= 80 && /^visdev top/' | wc -l)" -eq 1 ]
	tmux -L "$SESSION" resize-window -t main -x 200 -y 60
	wait_for eval 'screen | awk "length > 120" | grep -q .'
	screen | grep -q '  7 '
	keys q
	wait_for test -s rc
}

@test "top keeps going when NVML errs for a moment or a GPU falls off the bus" {
	TOP_ENV="MOCK_NVML_FIXTURE=$FIXTURES/four.json MOCK_NVML_FAULT_FILE=$PWD/fault VISDEV_CUDA_LIB=$MOCK_NVML_DIR/libcuda.so.1"
	TOP_ARGS="--interval 0.5" start_top --nvml-lib "$MOCK_NVML_DIR/libnvidia-ml.so.1"
	wait_for shows "  3 NVIDIA A100"
	echo unknown >fault
	wait_for shows "the GPUs could not be read"
	shows "retrying"
	# what was last seen stays on the screen
	shows "  3 NVIDIA A100"
	rm fault
	wait_for eval '! shows "could not be read"'
	echo "lost 1" >fault
	wait_for shows "fell off the bus"
	screen | grep -E '^ +1 .*fell off the bus +lost$'
	rm fault
	wait_for eval '! shows "fell off the bus"'
	keys q
	wait_for test -s rc
	[ "$(cat rc)" = 0 ]
}

@test "top colours its states, and not under NO_COLOR" {
	start_top --fixture "$FIXTURES/four.json"
	wait_for shows "  3 NVIDIA A100"
	tmux -L "$SESSION" capture-pane -e -p -t main | grep -q $'\e\\[[0-9;]*3[0-7]m'
	keys q
	wait_for test -s rc
	tmux -L "$SESSION" kill-server 2>/dev/null || true
	rm rc
	TOP_ENV=NO_COLOR=1 start_top --fixture "$FIXTURES/four.json"
	wait_for shows "  3 NVIDIA A100"
	! tmux -L "$SESSION" capture-pane -e -p -t main | grep -q $'\e\\[[0-9;]*3[0-7]m'
	keys q
	wait_for test -s rc
}

@test "top away from a terminal points to list --watch; --json and bad values are usage errors" {
	run "$VISDEV" --fixture "$FIXTURES/four.json" top </dev/null
	assert_status 1
	assert_output_has "top draws on a terminal, and this is none: for a log or a pipe, use 'visdev list --watch SECONDS'"
	run "$VISDEV" --fixture "$FIXTURES/four.json" top --json
	assert_status 2
	assert_output_has "visdev list --watch SECONDS --json"
	run "$VISDEV" --fixture "$FIXTURES/four.json" top --interval 0.1
	assert_status 2
	assert_output_has "--interval takes seconds, a number from 0.5 to 60, not '0.1'"
	run "$VISDEV" top --help
	assert_status 0
	assert_output_has "usage: visdev top"
}
