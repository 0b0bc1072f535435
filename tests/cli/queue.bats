#!/usr/bin/env bats
# visdev queue: many jobs over the GPUs as they free, each on its own lease,
# in line with everyone else; the journal, --resume, stops. Real processes,
# real flock, real signals; no timed assertions.

load helper

q() { "$VISDEV" --fixture "$FIXTURES/${FIX:-four}.json" queue "$@"; }
# the same, as the process itself: for `&`, so that $! is visdev's pid
qx() { exec "$VISDEV" --fixture "$FIXTURES/${FIX:-four}.json" queue "$@"; }
v() { "$VISDEV" --fixture "$FIXTURES/${FIX:-four}.json" "$@"; }
in_line() { [ "$(v leases --json | jq '.line | length')" -eq "$1" ]; }

# A job that marks its GPU taken (mkdir fails if another job has it), notes
# how many GPUs are taken at once, stays a moment and unmarks it.
mark_job() {
	cat >job.sh <<'EOF'
g=$CUDA_VISIBLE_DEVICES
mkdir "taken.$g" || { echo "overlap on $g" >>overlaps; exit 1; }
ls -d taken.* | wc -l >>busy
echo "$g" >>gpus
sleep 0.05
rmdir "taken.$g"
EOF
}

# Starts a queue in the background, to be ended with the test whatever happens.
bg() {
	qx "$@" >/dev/null 2>>bg.err &
	echo $! >>bg.pids
	BG=$!
}

teardown() {
	for p in $(cat "$BATS_TEST_TMPDIR/bg.pids" 2>/dev/null); do
		kill -KILL "$p" 2>/dev/null
	done
	pkill -KILL -f "queue-test-$BATS_TEST_NUMBER" 2>/dev/null
	touch "$BATS_TEST_TMPDIR/go"
	return 0
}

@test "60 jobs on 4 GPUs: never two on one GPU, all 4 kept busy, each job once" {
	mark_job
	for i in $(seq 60); do echo "sh job.sh; echo $i >>ran"; done >jobs.txt
	run q -q jobs.txt
	assert_status 0
	[ ! -e overlaps ]
	[ "$(sort -n ran | uniq | wc -l)" -eq 60 ] && [ "$(wc -l <ran)" -eq 60 ]
	[ "$(sort -n busy | tail -1)" -eq 4 ]
	[ "$(sort -u gpus | wc -l)" -eq 4 ]
	# the journal: every job started and ended once, with status 0
	[ "$(grep -c '^start' jobs.txt.journal)" -eq 60 ]
	[ "$(grep -c "^end.*	0$" jobs.txt.journal)" -eq 60 ]
}

@test "each job gets its GPUs, the order, its lease and its index; file order; output as whole prefixed lines" {
	cat >jobs.txt <<'EOF'
# a comment, then a blank line

echo "$VISDEV_JOB_INDEX $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER"; printf '%s' "$VISDEV_LEASE" >lease.0
echo to stderr >&2
EOF
	run --separate-stderr q -q jobs.txt
	assert_status 0
	[[ "$output" == "[0] 0 "[0-3]" PCI_BUS_ID"* ]]
	[ "$(jq -r '.command' lease.0)" = "queue jobs.txt[0]: $(sed -n 3p jobs.txt)" ]
	[ "$(jq '.devices | length' lease.0)" -eq 1 ]
	[[ "$stderr" == *"[1] to stderr"* ]]
}

@test "a failing job does not stop the others, and makes the exit status 1" {
	printf 'true\nexit 7\ntrue\ntrue\n' >jobs.txt
	run --separate-stderr q -q jobs.txt
	assert_status 1
	[[ "${lines[1]}" == "  1  failed     7  GPU "* ]]
	[ "$(grep -c '^end.*	0$' jobs.txt.journal)" -eq 3 ]
	run q -q jobs.txt --json
	[ "$(jq -c '[.done, .failed]' <<<"$output")" = "[3,1]" ]
	[ "$(jq -c '.results[1] | [.state, .status, .starts, .line]' <<<"$output")" = '["failed",7,1,2]' ]
}

@test "a grid: one job per combination, the first --grid slowest; mistakes refused before anything runs" {
	run q -q --template 'echo {lr} {bs} >>out' --grid lr=1e-3,1e-4 --grid bs=32,64
	assert_status 0
	[ "$(cat out | sort | tr '\n' ' ')" = "1e-3 32 1e-3 64 1e-4 32 1e-4 64 " ]
	[ -e visdev-queue.journal ]
	run q --template 'touch ran-{lr}' --grid lr=1 --grid bs=2
	assert_status 2
	[ "${#lines[@]}" -eq 1 ]
	assert_output_has "--grid bs is not used: the template has no {bs}"
	run q --template 'touch ran-{lr}-{seed}' --grid lr=1
	assert_status 2
	assert_output_has "the template uses {seed}, which no --grid gives"
	[ -z "$(ls ran-* 2>/dev/null)" ]
	run q --grid lr=1
	assert_status 2
	assert_output_has "--grid needs --template"
}

@test "--retries runs a failed job again; without it, it stays failed" {
	# fails the first time it runs, succeeds after
	echo 'if [ -e tried ]; then echo second; else touch tried; exit 1; fi' >jobs.txt
	run --separate-stderr q -q --retries 1 jobs.txt --json
	assert_status 0
	[ "$stderr" = "[0] second" ]
	[ "$(jq -c '.results[0] | [.state, .starts]' <<<"$output")" = '["done",2]' ]
	rm tried
	run q -q --force jobs.txt
	assert_status 1
	run q -q --retries x jobs.txt
	assert_status 2
	assert_output_has "--retries takes a whole number from 0 to 100, not 'x'"
}

@test "--log-dir: each job's output in files of its own, nothing on the terminal" {
	printf 'echo out-a; echo err-a >&2\necho out-b\n' >jobs.txt
	run --separate-stderr q -q --log-dir logs jobs.txt
	assert_status 0
	[ "$(cat logs/0.out)" = out-a ] && [ "$(cat logs/0.err)" = err-a ]
	[ "$(cat logs/1.out)" = out-b ] && [ ! -s logs/1.err ]
	[[ "$output" != *"[0] out-a"* && "$stderr" != *"[0] err-a"* ]]
}

@test "heavy output from 8 jobs: every line whole, with its job's index in front" {
	FIX=eight
	for j in $(seq 0 7); do
		# each line written in three pieces, by three printf
		echo "for i in \$(seq 300); do printf 'job$j-'; printf 'line%s-' \$i; printf '%0200d\n' $j; done"
	done >jobs.txt
	run --separate-stderr q -q jobs.txt
	assert_status 0
	jobs=$(grep '^\[' <<<"$output")
	[ "$(grep -c . <<<"$jobs")" -eq 2400 ]
	bad=$(grep -Ev '^\[([0-7])\] job\1-line[0-9]+-0{199}\1$' <<<"$jobs" | head -3)
	[ -z "$bad" ] || { echo "not whole: $bad"; return 1; }
}

@test "kill -9 of the queue, then --resume: every job finishes, only those in flight run twice" {
	for i in $(seq 12); do echo "echo $i >>started; sleep 0.3; echo $i >>ran # queue-test-$BATS_TEST_NUMBER"; done >jobs.txt
	bg -q jobs.txt
	queue=$BG
	wait_for eval '[ "$(wc -l <ran 2>/dev/null)" -ge 4 ]'
	kill -KILL "$queue"
	wait "$queue" || true
	cp started before_resume
	run q -q jobs.txt
	assert_status 2
	assert_output_has "--resume runs only those, --force starts over"
	run q -q --resume jobs.txt
	assert_status 0
	# every job ran; a job ran twice only if it had started before the kill and not ended
	[ "$(sort -n ran | uniq | wc -l)" -eq 12 ]
	for i in $(sort -n ran | uniq -d); do grep -qx "$i" before_resume; done
	[ "$(sort -n ran | uniq -d | wc -l)" -le 4 ]
	[ "$(grep -c '^visdev-queue-journal' jobs.txt.journal)" -eq 2 ]
}

@test "a journal cut short mid-record: read up to its last whole record, and resumed" {
	printf 'echo a >>ran\necho b >>ran\necho c >>ran\n' >jobs.txt
	run q -q --max-parallel 1 jobs.txt
	assert_status 0
	# the end of job 2 torn off halfway, as a crash mid-write leaves it
	head -c -3 jobs.txt.journal >torn && mv torn jobs.txt.journal
	run "$VISDEV" queue --status jobs.txt.journal --json
	[ "$(jq -c '[.done, .running]' <<<"$output")" = "[2,1]" ]
	run q -q --resume jobs.txt
	assert_status 0
	[ "$(tr '\n' ' ' <ran)" = "a b c c " ]
	run "$VISDEV" queue --status jobs.txt.journal --json
	[ "$(jq '.done' <<<"$output")" -eq 3 ]
	# junk in the middle is no journal
	printf 'visdev-queue-journal 1\tjobs=3\tdigest=1\tpid=1\nrubbish\n' >jobs.txt.journal
	run q -q --resume jobs.txt
	assert_status 1
	assert_output_has "'jobs.txt.journal' line 2: not a journal record"
}

@test "a job file changed since the journal: --resume refuses and says what changed; --force goes on" {
	printf 'echo a >>ran\nexit 1\necho c >>ran\n' >jobs.txt
	run q -q jobs.txt
	assert_status 1
	printf 'echo a >>ran\nexit 0\necho C >>ran\n' >jobs.txt
	run q -q --resume jobs.txt
	assert_status 2
	assert_output_has "job 1 (line 2) was 'exit 1' and is now 'exit 0'"
	assert_output_has "add --force"
	run q -q --resume --force jobs.txt
	assert_status 0
	[ "$(sort ran | tr '\n' ' ')" = "a c " ]
	run q -q --resume jobs.txt.missing
	assert_status 2
}

@test "Ctrl-C: every job's group gets SIGTERM (then SIGKILL), the journal is brought up to date, exit 130" {
	# a job whose child ignores SIGTERM: only SIGKILL, after the grace, ends it
	marker="queue-test-$BATS_TEST_NUMBER-$$"
	echo "trap '' TERM; sleep 60" >ignore.sh
	for i in $(seq 6); do echo "sh ignore.sh $marker; true"; done >jobs.txt
	bg -q --grace 1 jobs.txt
	queue=$BG
	wait_for eval '[ "$(pgrep -fxc "sh ignore.sh $marker")" -eq 4 ]'
	groups=$(pgrep -fx "sh ignore.sh $marker" | xargs -n 1 ps -o pgid= -p)
	kill -INT "$queue"
	status=0
	wait "$queue" || status=$?
	[ "$status" -eq 130 ]
	# nothing of any job's group is left: the shells, nor the sleeps they ignored SIGTERM for
	for g in $groups; do ! pgrep -g "$g"; done
	grep -q "stopping: 4 jobs sent SIGTERM" bg.err
	run "$VISDEV" queue --status jobs.txt.journal --json
	[ "$(jq -c '[.failed, .running, .pending]' <<<"$output")" = "[4,0,2]" ]
	[ "$(v leases --json | jq '.leases | length')" -eq 0 ]
}

@test "two queues and a run --wait share one GPU in the order they came" {
	FIX=one
	mark_job
	# queue A's first job holds the GPU until told to go
	printf 'while [ ! -e go ]; do sleep 0.02; done; echo A0 >>order; sh job.sh\necho A1 >>order; sh job.sh\n' >a.txt
	printf 'echo B0 >>order; sh job.sh\necho B1 >>order; sh job.sh\n' >b.txt
	bg -q a.txt
	a=$BG
	wait_for eval '[ "$(v leases --json | jq ".leases | length")" -eq 1 ]'
	"$VISDEV" --fixture "$FIXTURES/one.json" run -q --wait -- sh -c 'echo R >>order; sh job.sh' &
	r=$!
	wait_for in_line 1
	bg -q b.txt
	b=$BG
	wait_for in_line 2
	touch go
	wait "$a" "$r" "$b"
	[ ! -e overlaps ]
	[ "$(tr '\n' ' ' <order)" = "A0 R B0 A1 B1 " ]
}

@test "a queue inside 'run -n 2' divides those 2 GPUs among its jobs, and never waits for itself" {
	mark_job
	for i in $(seq 8); do echo 'sh job.sh'; done >jobs.txt
	run v run -n 2 -- sh -c 'printf "%s" "$CUDA_VISIBLE_DEVICES" >given; "$0" --fixture "$1" queue jobs.txt' \
		"$VISDEV" "$FIXTURES/four.json"
	assert_status 0
	assert_output_has "inside a visdev job that holds 2 devices"
	[ ! -e overlaps ]
	# the same GPUs, however each value names them
	[ "$(v map "$(cat given)" --order pci --json | jq -r '.devices[].uuid' | sort | tr '\n' ,)" = \
		"$(sort -u gpus | tr '\n' ,)" ]
	[ "$(sort -n busy | tail -1)" -eq 2 ]
}

@test "--status from another terminal: a running queue, then a finished one" {
	printf 'while [ ! -e go ]; do sleep 0.02; done\ntrue\n' >jobs.txt
	bg -q --max-parallel 1 jobs.txt
	queue=$BG
	wait_for eval '"$VISDEV" queue --status jobs.txt.journal | grep -q "running (pid $queue)"'
	run "$VISDEV" queue --status jobs.txt.journal
	assert_output_has "0 done, 0 failed, 1 running, 1 not started, of 2"
	touch go
	wait "$queue"
	run "$VISDEV" queue --status jobs.txt.journal
	assert_status 0
	assert_output_has "not running: 2 done"
	run "$VISDEV" queue --status nothing.journal
	assert_status 3
	assert_output_has "no journal 'nothing.journal'"
}

@test "jobs from standard input; a job that can never fit; usage mistakes" {
	echo 'echo from stdin' | q -q - >out
	[ "$(cat out | head -1)" = "[0] from stdin" ]
	[ -e visdev-queue.journal ]
	run q -q -n 5 jobs-none.txt
	assert_status 2
	assert_output_has "cannot read the job file 'jobs-none.txt'"
	echo true >jobs.txt
	run q -q -n 5 jobs.txt
	assert_status 3
	assert_output_has "job 0 can never fit on this machine"
	printf '# nothing\n\n' >empty.txt
	run q empty.txt
	assert_status 0
	assert_output_has "note: no jobs in 'empty.txt'"
	run q --or-cpu jobs.txt
	assert_status 2
	run q --max-parallel 0 jobs.txt
	assert_status 2
	assert_output_has "--max-parallel takes a whole number from 1 to 1000000, not '0'"
	run q jobs.txt other.txt
	assert_status 2
	run q --help
	assert_status 0
	assert_output_has "usage: visdev queue"
}

@test "--max-parallel caps the jobs at once" {
	mark_job
	for i in $(seq 8); do echo 'sh job.sh'; done >jobs.txt
	run q -q --max-parallel 2 jobs.txt
	assert_status 0
	[ "$(sort -n busy | tail -1)" -le 2 ]
}

@test "Ctrl-C while a job waits in line and another runs; and what ended jobs left behind is stopped too" {
	marker="queue-test-$BATS_TEST_NUMBER-$$"
	# job 0 leaves a process of its group behind, job 1 holds 3 GPUs, job 2 waits for them
	printf '%s\n' "sh -c 'sleep 60 # $marker' & echo left" "sleep 60" "true" >jobs.txt
	bg -n 2 jobs.txt
	queue=$BG
	wait_for eval '[ "$("$VISDEV" queue --status jobs.txt.journal --json | jq .running)" -eq 1 ]'
	wait_for eval '[ "$(v leases --json | jq ".line | length")" -eq 1 ]'
	kill -INT "$queue"
	status=0
	wait "$queue" || status=$?
	[ "$status" -eq 130 ]
	! pgrep -f "sleep 60 # $marker"
	[ "$(v leases --json | jq '.leases | length')" -eq 0 ]
}

@test "a background process of a job that ended still gets its output through, and is not killed by it" {
	printf '(sleep 0.3; echo late; touch marker) & echo early\nsleep 1\n' >jobs.txt
	run --separate-stderr q -q jobs.txt
	assert_status 0
	[ -e marker ]
	assert_output_has "[0] early"
	assert_output_has "[0] late"
}

@test "closed standard output: job output never lands in the journal" {
	printf 'echo a\necho b\n' >jobs.txt
	q -q jobs.txt >&-
	! grep -q '^\[' jobs.txt.journal
	run q -q --resume jobs.txt
	assert_status 0
}

@test "a damaged journal: refused with what to do; --force starts over, but never over a file that is no journal" {
	printf 'echo a\n' >jobs.txt
	q -q jobs.txt >/dev/null
	echo garbage >>jobs.txt.journal
	run q -q jobs.txt
	assert_status 1
	assert_output_has "the journal is damaged: --force (without --resume) starts over"
	run q -q --force jobs.txt
	assert_status 0
	! grep -q garbage jobs.txt.journal
	echo "precious" >notes.txt
	run q -q --force --state notes.txt jobs.txt
	assert_status 1
	assert_output_has "that file is no journal of visdev's"
	[ "$(cat notes.txt)" = precious ]
}

@test "a second queue on a journal in use is told which queue runs it" {
	printf 'while [ ! -e go ]; do sleep 0.02; done\n' >jobs.txt
	bg -q jobs.txt
	wait_for eval '"$VISDEV" queue --status jobs.txt.journal | grep -q running'
	run q -q jobs.txt
	assert_status 1
	assert_output_has "a queue (pid $BG) is running with the journal 'jobs.txt.journal' now"
	touch go
	wait "$BG"
}
